# Maat — see README.md. `make test` is what CI runs (.ci/run).
GO      ?= go
PKGS    ?= ./...
# Debian packages the tests drive for real: command → package.
SYSDEPS := chromium:chromium redis-server:redis-server gnutls-cli:gnutls-bin curl:curl openssl:openssl haproxy:haproxy nginx:nginx \
           wget:wget python3:python3 npm:npm node:nodejs java:default-jdk-headless git:git \
           dpkg-deb:dpkg systemd-analyze:systemd man:man-db shellcheck:shellcheck \
           zsh:zsh fish:fish update-ca-certificates:ca-certificates script:bsdutils firefox-esr:firefox-esr
# Packages without a command: fonts for the screenshots of the challenge page.
# python3-requests: the known-client tables' python-requests capture
# (internal/testcapture); java is the JDK's because its source launcher
# (java Get.java) needs jdk.compiler, which a JRE lacks.
SYSPKGS := fonts-noto-cjk python3-requests

.PHONY: image demo test deps check unit conformance test-next-go fuzz bench bench-peers attack storm storm-anubis build deb clean anubis-data

demo:
	$(GO) run ./cmd/edge demo

build:
	$(GO) build -o bin/edge ./cmd/edge

# deb builds the Debian package into DEBDIR with nfpm, a Go tool dependency
# (go.mod's tool line: nothing is downloaded besides Go modules): a static
# binary, the man page made from its own help, the copyright file made from
# the licenses of what it links, the systemd unit and the example
# configuration as /etc/edge/edge.yaml. dist/dist_test.go builds and checks it.
DEBDIR         ?= bin/deb
DEB_ARCH       ?= $(shell $(GO) env GOARCH)
DEB_MAINTAINER ?= Maat developers <maintainers@maatproxy.invalid>
# v1.2.3 → 1.2.3; 3 commits after it → 1.2.3+git3.abcdef0; no tag → 0.0.0+git20261203.abcdef0.
DEB_VERSION    ?= $(shell v=$$(git describe --tags --match 'v[0-9]*' 2>/dev/null | sed -e 's/^v//' -e 's/-\([0-9]*\)-g\([0-9a-f]*\)$$/+git\1.\2/'); \
                  [ -n "$$v" ] || v=0.0.0+git$$(git log -1 --format=%cd.%h --date=format:%Y%m%d 2>/dev/null); echo "$${v:-0.0.0}")

deb:
	@mkdir -p $(DEBDIR)
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -trimpath -ldflags='-s -w' -o $(DEBDIR)/edge ./cmd/edge
	$(GO) run ./dist/man -edge $(DEBDIR)/edge -o $(DEBDIR)/edge.1.gz
	CGO_ENABLED=0 $(GO) run ./dist/notices -o $(DEBDIR)/copyright ./cmd/edge
	$(DEBDIR)/edge completion bash > $(DEBDIR)/edge.bash
	$(DEBDIR)/edge completion zsh > $(DEBDIR)/_edge
	$(DEBDIR)/edge completion fish > $(DEBDIR)/edge.fish
	VERSION='$(DEB_VERSION)' ARCH='$(DEB_ARCH)' DEBDIR='$(DEBDIR)' MAINTAINER='$(DEB_MAINTAINER)' \
	  $(GO) tool nfpm package -f dist/nfpm.yaml -p deb -t $(DEBDIR)/

# image builds the OCI image without a container daemon (dist/image, with
# go-containerregistry): IMAGEDIR/oci is an OCI image layout, IMAGEDIR/edge.tar
# a tarball for `docker load` / `podman load`, tagged maat/edge:VERSION and
# :latest. Non-root (65532), entrypoint /usr/bin/edge, state in /data.
IMAGEDIR  ?= bin/image
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)

image:
	@mkdir -p $(IMAGEDIR)
	CGO_ENABLED=0 GOARCH=$(IMAGE_ARCH) $(GO) build -buildvcs=auto -trimpath -ldflags='-s -w' -o $(IMAGEDIR)/edge ./cmd/edge
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) $(GO) run ./dist/image -bin $(IMAGEDIR)/edge \
	  -version '$(DEB_VERSION)' -revision "$$(git rev-parse HEAD 2>/dev/null)" -arch $(IMAGE_ARCH) -o $(IMAGEDIR)

# test installs what the tests need when it is missing, then runs every test.
test: deps check unit

deps:
	@missing=""; for pair in $(SYSDEPS); do cmd=$${pair%%:*}; pkg=$${pair##*:}; \
	  command -v $$cmd >/dev/null 2>&1 || missing="$$missing $$pkg"; done; \
	for pkg in $(SYSPKGS); do dpkg -s $$pkg >/dev/null 2>&1 || missing="$$missing $$pkg"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	$(GO) mod download
	$(GO) tool nfpm --version >/dev/null   # builds the packager once, so that the package test times its own work
	$(GO) tool h2spec --version >/dev/null # likewise the HTTP/2 conformance suite edge/h2spec_test.go runs
	$(GO) tool helm version >/dev/null     # and helm, which dist/helm_test.go lints and renders the chart with

check:
	@bad=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$bad" ]; then echo "gofmt needed:"; echo "$$bad"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)
	$(GO) mod tidy -diff

# unit runs every test under the race detector: the edge is built of lock-free
# caches and atomics, and a race is a bug even when no test fails. Then it
# runs the tests that count allocations (testing.AllocsPerRun) once more
# without it, in the packages that have them: the race detector allocates
# on its own (sync.Pool drops items under it), so some skip under -race.
# Such a test is named ...DoesNotAllocate, or listed in ALLOCTESTS.
ALLOCTESTS := DoesNotAllocate|^TestRejectedCookies$$|^TestCacheAdmission$$
unit:
	$(GO) test -race -timeout 25m $(PKGS)
	$(GO) test -run '$(ALLOCTESTS)' $$(grep -rl --include='*_test.go' 'testing.AllocsPerRun' . | xargs -n1 dirname | sort -u)

# conformance runs the differential conformance suite (edge/conformance*_test.go):
# the same exchanges directly against a scripted upstream, through the edge
# with parking on and off, and through nginx (installed by deps; without it
# the column is skipped outside CI, and fails the run under CI=true). -v
# shows its table: exchange × protocol × target, agrees or not.
CONFORMANCE := $(GO) test -race -count=1 -timeout 10m -v -run '^TestConformance' ./edge
conformance:
	$(CONFORMANCE)

# test-next-go runs the conformance suite with the next Go release, which
# the go command fetches from the module proxy (go.mod stays where it is).
NEXTGO ?= go1.27.3
test-next-go:
	GOTOOLCHAIN=$(NEXTGO) $(CONFORMANCE)

# fuzz runs every fuzz target for FUZZTIME each (long runs; not part of test):
# those of fuzz/, and any of edge's own for what no other package can reach.
FUZZTIME ?= 60s
# Each input that finds new code is minimized for at most this long: at
# Go's default (60s) the edge package's target, in its large test binary,
# spent its whole minute minimizing the first such input, after 9 runs.
FUZZMINIMIZE ?= 5s
fuzz:
	@for pkg in $$($(GO) list ./fuzz/... ./edge); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) $$pkg || exit 1; \
	  done; done

# bench runs the Go benchmarks and the load scripts under bench/.
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	@for s in bench/*.sh; do [ -x "$$s" ] && "$$s"; done; true

# attack runs the attack suite (bench/attack) against this tree's edge, one
# fresh edge process per attack, and prints a Markdown table (about 2½
# minutes); then the gate cases of issue 33 (bypass tries, about a minute)
# and their table. ATTACKFLAGS passes flags: -src DIR attacks another tree's
# edge, -run REGEXP some attacks only, -gate the gate cases only; see
# go run ./bench/attack -h.
ATTACKFLAGS ?=
attack:
	$(GO) run ./bench/attack $(ATTACKFLAGS)

# storm runs the storm of issue 35 (bench/storm): a slow upstream (8 at a
# time, 200 req/s), bots of the kinds seen in the wild from 2,000 loopback
# addresses, people with and without pass cookies; bounded (20 s of storm by
# default) and stopping by itself. It prints people's p50/p95 and success,
# each bot kind's share reaching the upstream, the upstream's peak queue and
# the front's CPU. NGINX=path adds nginx with a per-IP limit_req, and
# ANUBIS=path (with NGINX) Anubis behind nginx, in the same run; make
# storm-anubis builds bin/anubis. STORMFLAGS passes flags, e.g.
# STORMFLAGS="-calm 10s -maat-config 'challenge: {when: storm}'"; see
# go run ./bench/storm -h and docs/operations.md ("Storm").
NGINX      ?=
ANUBIS     ?=
STORMFLAGS ?=
storm: build
	$(GO) run ./bench/storm -edge bin/edge $(if $(NGINX),-nginx $(NGINX)) $(if $(ANUBIS),-anubis $(ANUBIS)) $(STORMFLAGS)

# storm-anubis builds Anubis (ANUBIS_VERSION) into bin/anubis from its Go
# module, fetched by the go command, for make storm ANUBIS=bin/anubis. Its
# JavaScript bundles are made with npm upstream and are not in the module:
# empty stand-ins take their place (the storm's clients speak Anubis's API
# and run no script). Anubis does not become a dependency of the edge.
storm-anubis:
	GO='$(GO)' ANUBIS_VERSION='$(ANUBIS_VERSION)' sh bench/storm/anubis.sh

# bench-peers measures the edge against nginx and Caddy on this machine, in
# one run (bench/peers/doc.go): HTTP/1.1 and HTTP/2 throughput and CPU per
# request, new TLS connections per second, memory per idle connection. It
# installs the peers and load tools it drives, and builds Caddy from the
# version pinned in bench/peers/caddy/go.mod; gofloor (net/http's server
# proxying with nothing of its own) is measured beside them as the floor
# of any Go front. PEERS passes flags, e.g.
# PEERS="-rounds 5 -duration 10s".
BENCHDEPS := nginx:nginx wrk:wrk h2load:nghttp2-client
PEERS ?=
bench-peers: build
	@$(MAKE) --no-print-directory deps SYSDEPS="$(BENCHDEPS)" SYSPKGS=""
	cd bench/peers/caddy && $(GO) build -o ../../../bin/caddy github.com/caddyserver/caddy/v2/cmd/caddy
	$(GO) build -o bin/gofloor ./bench/peers/gofloor
	$(GO) run ./bench/peers -edge bin/edge -caddy bin/caddy -floor bin/gofloor $(PEERS)

# anubis-data copies Anubis's policy tree (its data/ directory: botPolicies.yaml
# and the snippets policy files import as (data)/…) from the module
# github.com/TecharoHQ/anubis at ANUBIS_VERSION, fetched by the go command,
# into policy/anubisdata, with its MIT license and a SOURCE record of the
# version, commit and date. Anubis does not become a dependency of the edge.
ANUBIS_VERSION ?= v1.27.0
anubis-data:
	GO='$(GO)' ANUBIS_VERSION='$(ANUBIS_VERSION)' sh policy/anubisdata/sync.sh

clean:
	rm -rf bin edge-fp.jsonl
