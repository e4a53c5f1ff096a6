# Maat — see README.md. `make test` is what CI runs (.ci/run).
GO      ?= go
PKGS    ?= ./...
# Debian packages the tests drive for real: command → package.
SYSDEPS := chromium:chromium redis-server:redis-server gnutls-cli:gnutls-bin curl:curl openssl:openssl haproxy:haproxy \
           wget:wget python3:python3 npm:npm node:nodejs
# Packages without a command: fonts for the screenshots of the challenge page.
SYSPKGS := fonts-noto-cjk

.PHONY: demo test deps check unit fuzz bench build clean

demo:
	$(GO) run ./cmd/edge demo

build:
	$(GO) build -o bin/edge ./cmd/edge

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

check:
	@bad=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$bad" ]; then echo "gofmt needed:"; echo "$$bad"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) mod tidy -diff

# unit runs every test under the race detector: the edge is built of lock-free
# caches and atomics, and a race is a bug even when no test fails.
unit:
	$(GO) test -race -timeout 25m $(PKGS)

# fuzz runs every fuzz target for FUZZTIME each (long runs; not part of test).
FUZZTIME ?= 60s
fuzz:
	@for pkg in $$($(GO) list ./fuzz/...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; done

# bench runs the Go benchmarks and the load scripts under bench/.
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	@for s in bench/*.sh; do [ -x "$$s" ] && "$$s"; done; true

clean:
	rm -rf bin edge-fp.jsonl
