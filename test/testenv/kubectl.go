package testenv

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildKubectlPlugins builds kubectl-approve and kubectl-reject into dir.
func BuildKubectlPlugins(dir string) error {
	for _, name := range []string{"kubectl-approve", "kubectl-reject"} {
		build := exec.Command("go", "build", "-o", filepath.Join(dir, name), "./cmd/"+name)
		build.Dir = RepoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			return errors.New(string(out))
		}
	}
	return nil
}

// Kubectl runs the real kubectl binary with a kubeconfig and the project's
// kubectl plugins first on PATH.
type Kubectl struct {
	// Path is the kubectl binary.
	Path string
	// Kubeconfig is the kubeconfig file to use.
	Kubeconfig string
	// PluginDir holds kubectl-approve and kubectl-reject.
	PluginDir string
}

// NewKubectl finds kubectl on PATH.
func NewKubectl(kubeconfig, pluginDir string) (*Kubectl, error) {
	path, err := exec.LookPath("kubectl")
	if err != nil {
		return nil, errors.New("these tests run the real kubectl binary: install kubectl")
	}
	return &Kubectl{Path: path, Kubeconfig: kubeconfig, PluginDir: pluginDir}, nil
}

// Result is what one kubectl invocation printed and how it exited.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs kubectl with args; an error means kubectl could not be run at all.
func (k *Kubectl) Run(args ...string) (Result, error) {
	cmd := exec.Command(k.Path, args...)
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+k.Kubeconfig,
		"PATH="+k.PluginDir+string(os.PathListSeparator)+os.Getenv("PATH"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		r.Code = exitErr.ExitCode()
		return r, nil
	}
	return r, err
}

// WriteKubeconfig writes data (a kubeconfig) into dir/name and returns the path.
func WriteKubeconfig(dir, name string, data []byte) (string, error) {
	path := filepath.Join(dir, name+".kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}
