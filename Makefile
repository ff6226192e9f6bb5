# profile-scheduler — build, generate, test.
#
# Tools are built from the Go module proxy at pinned versions and cached
# outside the checkout, so a fresh clone reuses them.

# The same cache as hack/build-control-plane.sh: PROFILE_SCHEDULER_CACHE, else
# $XDG_CACHE_HOME/profile-scheduler, else ~/.cache/profile-scheduler.
XDG_CACHE_HOME ?= $(HOME)/.cache
PROFILE_SCHEDULER_CACHE ?= $(XDG_CACHE_HOME)/profile-scheduler
CACHE_DIR ?= $(PROFILE_SCHEDULER_CACHE)
TOOLS_DIR ?= $(CACHE_DIR)/tools
LOCALBIN ?= $(CURDIR)/bin

CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.15.0
CONTROLLER_GEN ?= $(TOOLS_DIR)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
GOLANGCI_LINT ?= $(TOOLS_DIR)/golangci-lint-$(GOLANGCI_LINT_VERSION)

# Go test flags; override e.g. TEST_FLAGS="-run TestX -v".
TEST_FLAGS ?= -race -timeout 40m
# Every Go benchmark runs once in the same test binaries, so benchmarks
# cannot rot; empty it (BENCH_ONCE=) to skip them.
BENCH_ONCE ?= -bench . -benchtime=1x

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs, RBAC and the webhook configuration into config/.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd webhook paths="./..." output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code for the API types.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./..."

.PHONY: fmt
fmt: ## go fmt.
	go fmt ./...

.PHONY: vet
vet: ## go vet.
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (also on the test/upstreamdiff module).
	$(GOLANGCI_LINT) run ./...
	cd test/upstreamdiff && $(GOLANGCI_LINT) run ./...

.PHONY: control-plane
control-plane: ## Build the test control plane (kube-apiserver, etcd, kube-controller-manager) from the Go module proxy, cached.
	@hack/build-control-plane.sh >/dev/null

.PHONY: test
test: manifests generate fmt vet control-plane ## Run unit tests, the envtest suites on a real API server, every benchmark once, and the comparison with kube-scheduler.
	KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$$(hack/build-control-plane.sh)}" \
		go test $(TEST_FLAGS) $(BENCH_ONCE) ./... -coverprofile cover.out
	$(MAKE) test-upstream-diff

# The test tiers (test/README.md); make test runs them all.
INTEGRATION_PKGS ?= ./test/api ./test/kubectl ./test/scheduling ./test/storage ./test/dra ./test/operator
E2E_PKGS ?= ./test/e2e
SYSTEM_PKGS ?= ./test/faults ./test/failover ./test/perf ./test/outage ./test/latency

.PHONY: test-unit
test-unit: ## Run only the unit tests: the packages outside test/, and test/testenv.
	go test $(TEST_FLAGS) $$(go list ./... | grep -v '/test/') ./test/testenv

.PHONY: test-integration
test-integration: control-plane ## Run only the integration suites, each on its own real API server, the operator in-process.
	KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$$(hack/build-control-plane.sh)}" \
		go test $(TEST_FLAGS) $(INTEGRATION_PKGS)

.PHONY: test-e2e
test-e2e: control-plane ## Run only the end-to-end suite: the README's local run and config/default, with the real kubectl.
	KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$$(hack/build-control-plane.sh)}" \
		go test $(TEST_FLAGS) $(E2E_PKGS)

.PHONY: test-system
test-system: control-plane ## Run only the system suites: faults, failover, and the perf workloads' correctness smoke test.
	KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$$(hack/build-control-plane.sh)}" \
		go test $(TEST_FLAGS) $(SYSTEM_PKGS)

# Random clusters per run of the comparison with kube-scheduler; more with
# e.g. UPSTREAMDIFF_SEEDS=200 (UPSTREAMDIFF_FIRST_SEED picks where to start).
UPSTREAMDIFF_SEEDS ?= 10

.PHONY: test-upstream-diff
test-upstream-diff: ## Compare the default profile with kube-scheduler 1.37.2's framework on random clusters (part of make test; its own module, test/upstreamdiff).
	cd test/upstreamdiff && UPSTREAMDIFF_SEEDS=$(UPSTREAMDIFF_SEEDS) go test -race -count=1 -timeout 30m .

.PHONY: test-faults
test-faults: control-plane ## Run only the fault suite (part of make test), verbose, printing its figures: etcd and kube-apiserver restarted, the leader paused and cut off, mid-burst.
	KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$$(hack/build-control-plane.sh)}" \
		go test -race -count=1 ./test/faults -v -ginkgo.v

##@ Build

.PHONY: build
build: generate fmt vet ## Build the operator and the kubectl plugins into bin/.
	go build -o $(LOCALBIN)/profile-scheduler .
	go build -o $(LOCALBIN)/kubectl-approve ./cmd/kubectl-approve
	go build -o $(LOCALBIN)/kubectl-reject ./cmd/kubectl-reject

PREFIX ?= /usr/local
.PHONY: install-kubectl-plugins
install-kubectl-plugins: build ## Install kubectl-approve and kubectl-reject into $(PREFIX)/bin (on PATH, kubectl finds them).
	install -m 0755 $(LOCALBIN)/kubectl-approve $(LOCALBIN)/kubectl-reject $(PREFIX)/bin/

.PHONY: run
run: manifests generate fmt vet ## Run the operator against the cluster of the current kubeconfig (admission webhook off: the API server cannot call this machine).
	go run . --webhook-port=0 $(ARGS)

.PHONY: install
install: manifests ## Install the CRDs into the cluster of the current kubeconfig.
	kubectl apply --server-side -f config/crd/bases

##@ Local run

# Where run-local writes its kubeconfig (LOCAL_DIR/kubeconfig); extra flags
# of profile-scheduler-local go in LOCAL_ARGS.
LOCAL_DIR ?= $(LOCALBIN)/local
LOCAL_ARGS ?=

.PHONY: build-local
build-local: ## Build profile-scheduler-local, profile-scheduler (for validate and convert) and the kubectl plugins into bin/.
	go build -o $(LOCALBIN)/profile-scheduler-local ./cmd/profile-scheduler-local
	go build -o $(LOCALBIN)/profile-scheduler .
	go build -o $(LOCALBIN)/kubectl-approve ./cmd/kubectl-approve
	go build -o $(LOCALBIN)/kubectl-reject ./cmd/kubectl-reject

# exec: the run is make's own child, not a shell's, so it stops when make
# dies, even by SIGKILL.
.PHONY: run-local
run-local: build-local ## Everything on this machine: local control plane, simulated nodes, sample profiles, the operator. Ctrl-C stops it all.
	export KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$$(hack/build-control-plane.sh)}" && \
		exec $(LOCALBIN)/profile-scheduler-local --dir=$(LOCAL_DIR) $(LOCAL_ARGS)

##@ Deployment

# The operator image; deploy sets it in the manifests it applies.
IMG ?= profile-scheduler:latest
# The kustomization deploy applies: config/prometheus adds a ServiceMonitor
# and a verifiable metrics certificate (docs/metrics.md).
DEPLOY_CONFIG ?= config/default

.PHONY: docker-build
docker-build: ## Build the operator image IMG.
	docker build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the operator image IMG.
	docker push $(IMG)

.PHONY: deploy
deploy: manifests ## Install CRDs, RBAC, admission policy and the operator (image IMG) into the cluster of the current kubeconfig.
	DEPLOY_CONFIG=$(DEPLOY_CONFIG) hack/deploy.sh apply $(IMG)

.PHONY: undeploy
undeploy: ## Remove what deploy installed (the CRDs too, and with them every SchedulingProfile and WaitingPod).
	DEPLOY_CONFIG=$(DEPLOY_CONFIG) hack/deploy.sh delete $(IMG)

##@ Performance

# Workloads and flags of the benchmark; see docs/performance.md.
BENCH_ARGS ?=

.PHONY: bench
bench: ## Run the scheduling benchmark (default workloads, a few minutes) against a local API server.
	KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$$(hack/build-control-plane.sh)}" \
		go run ./test/perf --out=$(LOCALBIN)/perf $(BENCH_ARGS)

# Flags of the failover benchmark (failovers, nodes, rate, lease settings).
FAILOVER_ARGS ?=

.PHONY: bench-failover
bench-failover: ## Kill the leader of two operator replicas 10 times under a stream of pods and measure the takeovers (a few minutes).
	KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$$(hack/build-control-plane.sh)}" \
		go run ./test/failover --out=$(LOCALBIN)/failover $(FAILOVER_ARGS)

##@ Tools

$(CONTROLLER_GEN):
	@mkdir -p $(TOOLS_DIR)
	@echo ">> building controller-gen $(CONTROLLER_TOOLS_VERSION)"
	GOBIN=$(TOOLS_DIR)/tmp go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(TOOLS_DIR)/tmp/controller-gen $@

$(GOLANGCI_LINT):
	@mkdir -p $(TOOLS_DIR)
	@echo ">> building golangci-lint $(GOLANGCI_LINT_VERSION) (takes a few minutes the first time)"
	GOBIN=$(TOOLS_DIR)/tmp go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(TOOLS_DIR)/tmp/golangci-lint $@
