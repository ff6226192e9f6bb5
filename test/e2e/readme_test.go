package e2e_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// step is one command of the README's walk-through and what its output
// must show.
type step struct {
	cmd   string
	check func(stdout string)
}

func contains(s string) func(string) {
	return func(out string) { Expect(out).To(ContainSubstring(s)) }
}

func matches(re string) func(string) {
	return func(out string) { Expect(out).To(MatchRegexp(re)) }
}

// nodesOf returns the NODE column of `kubectl get pods -o wide`.
func nodesOf(out string) map[string]int {
	nodes := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 6 {
			nodes[f[6]]++
		}
	}
	return nodes
}

// walkthrough is the README's "Try it" section, command for command. The
// suite fails when the README and this list differ, so every command the
// README shows is run here.
var walkthrough = []step{
	{"make run-local", nil}, // started by BeforeAll
	{"export KUBECONFIG=$PWD/bin/local/kubeconfig PATH=$PWD/bin:$PATH", nil},
	{"kubectl get nodes -L topology.kubernetes.io/zone", func(out string) {
		Expect(regexp.MustCompile(`(?m)^node-\d+\s+Ready\s`).FindAllString(out, -1)).To(HaveLen(6))
		for _, zone := range []string{"zone-a", "zone-b", "zone-c"} {
			Expect(out).To(ContainSubstring(zone))
		}
	}},
	{"kubectl get schedulingprofiles", func(out string) {
		for _, name := range []string{"approvals", "bin-packing", "gangs", "gpu-gangs", "profile-scheduler", "workloads"} {
			Expect(out).To(MatchRegexp(`(?m)^%[1]s\s+%[1]s\s+True\s+True\s`, name))
		}
	}},
	{"kubectl apply -f config/samples/pods/web.yaml", contains("pod/web-2 created")},
	{"kubectl wait --for=condition=Ready pods -l app=web", func(out string) {
		Expect(strings.Count(out, "condition met")).To(Equal(3))
	}},
	{"kubectl get pods -l app=web -o wide", func(out string) {
		Expect(out).To(MatchRegexp(`web-0\s+1/1\s+Running`))
		Expect(nodesOf(out)).To(HaveLen(3), "the default profile (LeastAllocated) spreads the pods:\n%s", out)
	}},
	{"profile-scheduler validate --feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true config/samples/ 2>&1", func(out string) {
		Expect(out).To(MatchRegexp(`^validate: [1-9][0-9]* SchedulingProfiles checked, 0 refused; 0 documents malformed; [0-9]+ documents of other kinds skipped\n$`),
			"the sample profiles pass: no finding, only the summary")
	}},
	// The same reason offline, from the dry run and at apply time.
	{badPatch + ` --dry-run=client -o yaml | profile-scheduler validate - 2>&1 | grep NoSuchPlugin`,
		contains(`<stdin>:1: profile-scheduler: ` + noSuchPlugin)},
	{badPatch + ` --dry-run=client -o yaml | kubectl apply --dry-run=server -f - 2>&1 | grep 'denied the request'`,
		contains(`admission webhook "vschedulingprofile.scheduling.schedprofiles.io" denied the request: SchedulingProfile profile-scheduler ` + noSuchPlugin)},
	{badPatch + ` --dry-run=client -o yaml | kubectl apply -f - 2>&1 | grep 'denied the request'`,
		contains(`admission webhook "vschedulingprofile.scheduling.schedprofiles.io" denied the request: SchedulingProfile profile-scheduler ` + noSuchPlugin)},
	{`kubectl patch schedulingprofile profile-scheduler --type=merge -p '{"spec":{"pluginConfig":[{"name":"NodeResourcesFit","args":{"scoringStrategy":{"type":"MostAllocated"}}}]}}'`, contains("patched")},
	{"kubectl wait schedulingprofile/profile-scheduler --for=condition=Ready", contains("condition met")},
	{"kubectl apply -f config/samples/shadow/spread-shadow.yaml", contains("schedulingprofile.scheduling.schedprofiles.io/spread-shadow created")},
	{"kubectl wait schedulingprofile/spread-shadow --for=condition=Ready", contains("condition met")},
	{"kubectl apply -f config/samples/pods/batch.yaml", contains("pod/batch-2 created")},
	{"kubectl wait --for=condition=Ready pods -l app=batch", func(out string) {
		Expect(strings.Count(out, "condition met")).To(Equal(3))
	}},
	{"kubectl get pods -l app=batch -o wide", func(out string) {
		Expect(nodesOf(out)).To(HaveLen(1), "the profile now packs pods (MostAllocated):\n%s", out)
	}},
	{"kubectl wait schedulingprofile/spread-shadow --for=jsonpath='{.status.shadow.evaluated}'=3 --timeout=60s", contains("condition met")},
	{"kubectl get schedulingprofile spread-shadow -o wide", func(out string) {
		// A shadow claims no schedulerName and serves no generation.
		Expect(out).To(MatchRegexp(`(?m)^spread-shadow\s+(<none>\s+)?True\s+True\s+False\s+\S+\s+1\s+(<none>\s+)?profile-scheduler\s+3\s+0\s+Shadowing\s`), "the shadow spreads where the live profile packs:\n%s", out)
	}},
	{"kubectl apply -f config/samples/pods/train.yaml", contains("pod/train-0 created")},
	{"kubectl wait --for=create waitingpod/train-0", contains("condition met")},
	{"kubectl wait --for=condition=Waiting waitingpod/train-0", contains("condition met")},
	{"kubectl get waitingpods", matches(`(?m)^train-0\s+train-0\s+approvals\s+True\s+\S+\s*$`)},
	{"kubectl describe pod train-0", func(out string) {
		Expect(out).To(MatchRegexp(`scheduling.schedprofiles.io/WaitingAtPermit\s+True`))
		Expect(out).To(MatchRegexp(`WaitingAtPermit\s+.*Held at Permit by ManualApproval until .*: decide with kubectl approve\|reject waitingpod/train-0`))
	}},
	{`kubectl approve waitingpod/train-0 --reason "capacity reviewed"`, contains("waitingpod/train-0 approved")},
	{"kubectl wait --for=condition=Ready pod/train-0", contains("condition met")},
	{"kubectl get events --field-selector involvedObject.name=train-0", func(out string) {
		Expect(out).To(ContainSubstring("Approved by admin"))
		Expect(out).To(ContainSubstring("capacity reviewed"))
		Expect(out).To(ContainSubstring("Successfully assigned default/train-0"))
	}},
	{"kubectl apply -f config/samples/pods/gang.yaml", func(out string) {
		Expect(out).To(ContainSubstring("podgroup.scheduling.x-k8s.io/workers created"))
		Expect(out).To(ContainSubstring("job.batch/workers created"))
	}},
	// The workers ask for 250m CPU: every node has that much left, wherever
	// the earlier steps placed their pods.
	{"kubectl label nodes node-0 node-1 node-2 gang=workers", func(out string) {
		Expect(strings.Count(out, " labeled")).To(Equal(3), out)
	}},
	{"kubectl wait pg/workers --for=jsonpath='{.status.waiting}'=3", contains("condition met")},
	{"kubectl get waitingpods -o wide", func(out string) {
		// The Job controller names indexed pods JOB-INDEX-RANDOM.
		Expect(regexp.MustCompile(`(?m)^workers-\d-\w+\s+workers-\d-\w+\s+node-[012]\s+gangs\s+workers\s+Coscheduling\s+False\s+\d{4}-\S+\s+Coscheduling: 3/4 members assigned\s`).FindAllString(out, -1)).To(HaveLen(3), out)
	}},
	{"kubectl get pg", matches(`(?m)^workers\s+Scheduling\s+4\s+3\s`)},
	{"kubectl label nodes node-3 gang=workers", contains("node/node-3 labeled")},
	{"kubectl wait --for=condition=Ready pods -l app=workers", func(out string) {
		Expect(strings.Count(out, "condition met")).To(Equal(4))
	}},
	{"kubectl get pg workers", matches(`(?m)^workers\s+Running\s+4\s+4\s+4\s`)},
	{"kubectl wait --for=condition=Complete job/workers --timeout=2m", contains("job.batch/workers condition met")},
	{"kubectl get pods -l app=workers", func(out string) {
		Expect(regexp.MustCompile(`(?m)^workers-[0-3]-\w+\s+0/1\s+Completed\s`).FindAllString(out, -1)).To(HaveLen(4), out)
	}},
	{"kubectl apply -f config/samples/pods/gpu-gang.yaml", func(out string) {
		Expect(out).To(ContainSubstring("resourceclaimtemplate.resource.k8s.io/two-gpus created"))
		Expect(out).To(ContainSubstring("podgroup.scheduling.x-k8s.io/gpu-workers created"))
		Expect(out).To(ContainSubstring("job.batch/gpu-workers created"))
	}},
	{"kubectl wait pg/gpu-workers --for=jsonpath='{.status.waiting}'=4", contains("condition met")},
	{"kubectl get waitingpods -l app=gpu-workers -o custom-columns=NAME:.metadata.name,NODE:.status.nodeName,CLAIM:.status.claims[0].resourceClaim,POOL:.status.claims[0].devices[0].pool,DEVICES:.status.claims[0].devices[*].device", func(out string) {
		// Each worker holds two GPUs of its own node; the simulated
		// driver names a node's pool after it.
		rows := regexp.MustCompile(`(?m)^gpu-workers-\d-\w+\s+(node-[135])\s+gpu-workers-\d-\w+-gpus-\w+\s+(node-[135])\s+(gpu-[0-3]),(gpu-[0-3])\s*$`).FindAllStringSubmatch(out, -1)
		Expect(rows).To(HaveLen(4), out)
		held := map[string]bool{}
		for _, row := range rows {
			Expect(row[2]).To(Equal(row[1]), "the devices are on the pod's node:\n%s", out)
			Expect(row[3]).NotTo(Equal(row[4]), out)
			for _, device := range row[3:] {
				Expect(held).NotTo(HaveKey(row[1]+"/"+device), "no GPU is held for two workers:\n%s", out)
				held[row[1]+"/"+device] = true
			}
		}
	}},
	{`kubectl approve pg/gpu-workers --reason "8 GPUs reviewed"`, contains("podgroup/gpu-workers: 4 of 4 members approved")},
	{"kubectl wait --for=condition=Ready pods -l app=gpu-workers", func(out string) {
		Expect(strings.Count(out, "condition met")).To(Equal(4))
	}},
	{"kubectl get resourceclaims", func(out string) {
		Expect(regexp.MustCompile(`(?m)^gpu-workers-\d-\w+-gpus-\w+\s+allocated,reserved\s`).FindAllString(out, -1)).To(HaveLen(4), out)
	}},
	{"kubectl delete -f config/samples/pods/gpu-gang.yaml --cascade=foreground", func(out string) {
		Expect(out).To(ContainSubstring(`job.batch "gpu-workers" deleted`))
	}},
	{"kubectl apply -f config/samples/pods/gpu-workload.yaml", func(out string) {
		Expect(out).To(ContainSubstring("workload.scheduling.k8s.io/trainer created"))
		Expect(out).To(ContainSubstring("podgroup.scheduling.k8s.io/trainer-workers created"))
		Expect(out).To(ContainSubstring("pod/trainer-3 created"))
	}},
	{"for i in 0 1 2 3; do kubectl wait --for=create waitingpod/trainer-$i; done", func(out string) {
		Expect(strings.Count(out, "condition met")).To(Equal(4), out)
	}},
	{"kubectl wait --for=condition=Waiting waitingpods -l app=trainer", func(out string) {
		Expect(strings.Count(out, "condition met")).To(Equal(4), out)
	}},
	{"kubectl get waitingpods -l app=trainer -o custom-columns=NAME:.metadata.name,NODE:.status.nodeName,PLUGINS:.status.plugins,DEVICES:.status.claims[0].devices[*].device", func(out string) {
		// Each member holds a GPU of its node, and ManualApproval holds
		// every member of the group placed as one.
		rows := regexp.MustCompile(`(?m)^trainer-[0-3]\s+(node-[135])\s+\S*ManualApproval\S*\s+(gpu-[0-3])\s*$`).FindAllStringSubmatch(out, -1)
		Expect(rows).To(HaveLen(4), out)
	}},
	{`kubectl approve podgroup/trainer-workers --reason "4 GPUs reviewed"`, contains("podgroup.scheduling.k8s.io/trainer-workers: 4 of 4 members approved")},
	{"kubectl wait --for=condition=Ready pods -l app=trainer", func(out string) {
		Expect(strings.Count(out, "condition met")).To(Equal(4))
	}},
	{"kubectl get pods -l app=trainer -o wide", func(out string) {
		Expect(regexp.MustCompile(`(?m)^trainer-[0-3]\s+1/1\s+Running\s+\d+\s+\S+\s+\S+\s+node-[135]\s`).FindAllString(out, -1)).To(HaveLen(4), out)
	}},
	{"kubectl apply -f config/samples/pods/database.yaml", func(out string) {
		Expect(out).To(ContainSubstring("statefulset.apps/database created"))
	}},
	{"kubectl rollout status statefulset/database", contains("roll out complete")},
	{"kubectl get pod database-0 -o wide", func(out string) {
		nodes := nodesOf(out)
		Expect(nodes).To(HaveLen(1), out)
		for node := range nodes {
			databaseNode = node
		}
	}},
	{"kubectl get pvc,pv", func(out string) {
		Expect(out).To(MatchRegexp(`(?m)^persistentvolumeclaim/data-database-0\s+Bound\s+pvc-[0-9a-f-]+\s+1Gi\s+RWO\s+local\s`))
		Expect(out).To(MatchRegexp(`(?m)^persistentvolume/pvc-[0-9a-f-]+\s+1Gi\s+RWO\s+Delete\s+Bound\s+default/data-database-0\s+local\s`))
	}},
	{"kubectl get pv -o custom-columns=NAME:.metadata.name,CLAIM:.spec.claimRef.name,NODE:.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]", func(out string) {
		Expect(databaseNode).NotTo(BeEmpty())
		Expect(out).To(MatchRegexp(`(?m)^pvc-[0-9a-f-]+\s+data-database-0\s+%s\s*$`, regexp.QuoteMeta(databaseNode)),
			"the volume is on the pod's node")
	}},
	{"kubectl delete -f config/samples/pods/ --ignore-not-found", func(out string) {
		Expect(out).To(ContainSubstring(`pod "train-0" deleted`))
		Expect(out).To(ContainSubstring(`statefulset.apps "database" deleted`))
		Expect(out).To(ContainSubstring(`job.batch "workers" deleted`))
		Expect(out).To(ContainSubstring(`podgroup.scheduling.x-k8s.io "workers" deleted`))
		Expect(out).To(ContainSubstring(`podgroup.scheduling.k8s.io "trainer-workers" deleted`))
		Expect(out).To(ContainSubstring(`workload.scheduling.k8s.io "trainer" deleted`))
	}},
	{"kubectl delete -f config/samples/shadow/", contains(`schedulingprofile.scheduling.schedprofiles.io "spread-shadow" deleted`)},
	{"kubectl delete pvc --all", contains(`persistentvolumeclaim "data-database-0" deleted`)},
}

// badPatch changes the default profile with a mistake; noSuchPlugin is the
// reason every check gives for it.
const (
	badPatch     = `kubectl patch schedulingprofile profile-scheduler --type=merge -p '{"spec":{"plugins":{"filter":{"enabled":[{"name":"NoSuchPlugin"}]}}}}'`
	noSuchPlugin = `cannot be built: Filter plugin "NoSuchPlugin": no such plugin is registered`
)

// databaseNode is the node of pod database-0, which its volume must be on.
var databaseNode string

// readmeCommands returns the commands of the README's "Try it" section:
// the lines of its sh code blocks, without blank lines and comments.
func readmeCommands() []string {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "README.md"))
	Expect(err).NotTo(HaveOccurred())
	var cmds []string
	inSection, inBlock := false, false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			inSection = strings.TrimSpace(line) == "## Try it"
		case !inSection:
		case strings.HasPrefix(line, "```"):
			inBlock = !inBlock && strings.TrimPrefix(line, "```") == "sh"
		case inBlock:
			if cmd := strings.TrimSpace(line); cmd != "" && !strings.HasPrefix(cmd, "#") {
				cmds = append(cmds, cmd)
			}
		}
	}
	Expect(cmds).NotTo(BeEmpty(), "README.md has no \"## Try it\" section with sh blocks")
	return cmds
}

// localRun is `make run-local` running in its own process group, as in a
// terminal.
type localRun struct {
	cmd  *exec.Cmd
	dir  string
	out  *syncBuffer
	done chan struct{}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startLocalRun() *localRun {
	GinkgoHelper()
	dir, err := os.MkdirTemp("", "run-local-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	return startLocalRunIn(dir)
}

// startLocalRunIn starts `make run-local` with LOCAL_DIR=dir and waits
// until it is ready.
func startLocalRunIn(dir string) *localRun {
	GinkgoHelper()
	r := &localRun{dir: dir, out: &syncBuffer{}, done: make(chan struct{})}
	// The README's command, with the kubeconfig in a directory of this test
	// and the metrics and probe ports left to the system, so a developer's
	// own `make run-local` is not disturbed.
	r.cmd = exec.Command("make", "--no-print-directory", "run-local", "LOCAL_DIR="+dir,
		"LOCAL_ARGS=--metrics-bind-address=0 --health-probe-bind-address=0")
	r.cmd.Dir = testenv.RepoRoot()
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r.cmd.Stdout = io.MultiWriter(r.out, GinkgoWriter)
	r.cmd.Stderr = GinkgoWriter
	Expect(r.cmd.Start()).To(Succeed())
	go func() {
		defer close(r.done)
		_ = r.cmd.Wait()
	}()
	DeferCleanup(r.kill)
	// The first run builds the command: allow for a cold build cache.
	Eventually(func(g Gomega) {
		select {
		case <-r.done:
			g.Expect(r.out.String()).To(ContainSubstring("Press Ctrl-C"), "make run-local exited: %v", r.cmd.ProcessState)
			StopTrying("make run-local exited").Now()
		default:
		}
		g.Expect(r.out.String()).To(ContainSubstring("Press Ctrl-C"))
	}, 10*time.Minute, time.Second).Should(Succeed())
	return r
}

// interrupt sends SIGINT to the process group, as Ctrl-C in a terminal does.
func (r *localRun) interrupt() error {
	return syscall.Kill(-r.cmd.Process.Pid, syscall.SIGINT)
}

// kill ends whatever is left of the run if a spec failed half-way.
func (r *localRun) kill() {
	select {
	case <-r.done:
		return
	default:
	}
	procs := descendants(r.cmd.Process.Pid)
	_ = r.interrupt()
	select {
	case <-r.done:
	case <-time.After(time.Minute):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		for _, pid := range procs {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		<-r.done
	}
}

// descendants lists the processes below pid, read from /proc.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, ok := procStat(p); ok {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// procStat returns the parent and state of pid.
func procStat(pid int) (ppid int, state string, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", false
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	rest := string(data[bytes.LastIndexByte(data, ')')+1:])
	f := strings.Fields(rest)
	if len(f) < 2 {
		return 0, "", false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0], err == nil
}

// running says whether pid is a live process (not a zombie).
func running(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	_, state, ok := procStat(pid)
	return ok && state != "Z" && state != "X"
}

// shell runs a README command with bash in the root of the checkout.
func shell(env []string, cmd string) (string, error) {
	c := exec.Command("bash", "-c", cmd)
	c.Dir = testenv.RepoRoot()
	c.Env = env
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("%w: %s%s", err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

var _ = Describe("The README's Try it walk-through", Ordered, func() {
	var run *localRun

	BeforeAll(func() {
		if _, err := exec.LookPath("kubectl"); err != nil {
			Fail("the walk-through runs the real kubectl binary: install kubectl")
		}
		run = startLocalRun()
	})

	It("lists exactly the commands this suite runs", func() {
		var want []string
		for _, s := range walkthrough {
			want = append(want, s.cmd)
		}
		Expect(readmeCommands()).To(Equal(want))
	})

	It("runs every command of the walk-through with the results the README describes", func() {
		Expect(walkthrough[0].cmd).To(Equal("make run-local"))
		env := os.Environ()
		for _, s := range walkthrough[1:] {
			By(s.cmd)
			if strings.HasPrefix(s.cmd, "export ") {
				// The test's run writes its kubeconfig elsewhere than bin/local.
				cmd := strings.ReplaceAll(s.cmd, "$PWD/bin/local", run.dir)
				out, err := shell(env, cmd+` && printf '%s\n%s' "$KUBECONFIG" "$PATH"`)
				Expect(err).NotTo(HaveOccurred())
				kubeconfig, path, _ := strings.Cut(out, "\n")
				Expect(kubeconfig).To(BeAnExistingFile())
				env = append(env, "KUBECONFIG="+kubeconfig, "PATH="+path)
				continue
			}
			out, err := shell(env, s.cmd)
			Expect(err).NotTo(HaveOccurred(), s.cmd)
			GinkgoWriter.Printf("$ %s\n%s", s.cmd, out)
			s.check(out)
		}
	})

	It("runs a Deployment: kube-controller-manager creates its pods and a sample profile places them", func() {
		env := append(os.Environ(), "KUBECONFIG="+filepath.Join(run.dir, "kubeconfig"))
		out, err := shell(env, `kubectl apply -f - <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: hello
spec:
  replicas: 3
  selector:
    matchLabels:
      app: hello
  template:
    metadata:
      labels:
        app: hello
    spec:
      schedulerName: bin-packing
      containers:
      - name: hello
        image: nginx:1.27
EOF`)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("deployment.apps/hello created"))
		Eventually(func(g Gomega) {
			out, err := shell(env, "kubectl get pods -l app=hello --no-headers")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(regexp.MustCompile(`(?m)^hello-\S+\s+1/1\s+Running\s`).FindAllString(out, -1)).To(HaveLen(3), out)
		}, time.Minute, time.Second).Should(Succeed())
		// No other scheduler runs: the bin-packing profile placed them.
		Eventually(func(g Gomega) {
			out, err := shell(env, "kubectl get events --field-selector reason=Scheduled -o custom-columns=POD:.involvedObject.name --no-headers")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(regexp.MustCompile(`(?m)^hello-\S+$`).FindAllString(out, -1)).To(HaveLen(3), out)
		}).Should(Succeed())
		_, err = shell(env, "kubectl delete deployment hello")
		Expect(err).NotTo(HaveOccurred())
	})

	It("fills in service account token Secrets with tokens the API server accepts", func() {
		env := append(os.Environ(), "KUBECONFIG="+filepath.Join(run.dir, "kubeconfig"))
		_, err := shell(env, `kubectl apply -f - <<'EOF'
apiVersion: v1
kind: Secret
metadata:
  name: default-token
  annotations:
    kubernetes.io/service-account.name: default
type: kubernetes.io/service-account-token
EOF`)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(shell, env, "kubectl delete secret default-token")
		ca := filepath.Join(GinkgoT().TempDir(), "ca.crt")
		Eventually(func(g Gomega) {
			_, err := shell(env, `kubectl get secret default-token -o jsonpath='{.data.ca\.crt}' | base64 -d > `+ca+` && test -s `+ca)
			g.Expect(err).NotTo(HaveOccurred())
		}).Should(Succeed())
		// Only the token, signed by kube-controller-manager, authenticates.
		out, err := shell(env, `kubectl --kubeconfig=/dev/null --server="$(kubectl config view -o jsonpath='{.clusters[0].cluster.server}')" `+
			`--certificate-authority=`+ca+` --token="$(kubectl get secret default-token -o jsonpath='{.data.token}' | base64 -d)" auth whoami`)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(MatchRegexp(`Username\s+system:serviceaccount:default:default`))
	})

	It("stops everything it started on Ctrl-C, and removes its kubeconfig", func() {
		procs := descendants(run.cmd.Process.Pid)
		Expect(len(procs)).To(BeNumerically(">=", 3), "make, profile-scheduler-local, kube-apiserver and etcd")
		Expect(run.interrupt()).To(Succeed())
		Eventually(run.done, time.Minute).Should(BeClosed())
		Expect(run.out.String()).NotTo(BeEmpty())
		for _, pid := range procs {
			Eventually(func() bool { return running(pid) }, 10*time.Second).Should(BeFalse(), "process %d still runs", pid)
		}
		Expect(filepath.Join(run.dir, "kubeconfig")).NotTo(BeAnExistingFile())
	})
})
