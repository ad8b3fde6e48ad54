# Sagacity for Go. `make run` and `make test` are all a newcomer needs.

GO      ?= go
BIN     ?= bin/sagacity
# The public packages are modules of their own, each with its own go.mod, so
# that a program outside requires only what they need (docs/maintaining.md,
# Modules); go.mod replaces each by its directory here. ./... does not reach
# into them, so PKGS names their packages too.
MODULES ?= internal/parallel wire toolsig evidence client
PKGS    ?= ./... $(MODULES:%=github.com/sagacity-go/sagacity/%/...)

HTMX_VERSION ?= 2.0.11
AXE_VERSION  ?= 4.14.1

.PHONY: run test lint fuzz build generate check bench htmx axe screenshots clean

# VERSION is stamped into the binary (sagacity version).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS := -s -w -X main.buildVersion=$(VERSION)
# gotestsum runs go test and ends with the counts and every skipped test, with its reason.
# It is a tool of the module (go.mod's tool block, like templ and mailpit), so go mod
# download fetches it with everything else and make test needs no network after that.
GOTESTSUM ?= $(GO) tool gotestsum
# golangci-lint is a tool of its own module (tools/go.mod), so the product's go.mod
# does not gain its hundred dependencies; make lint builds it into bin/ once per version.
GOLANGCI_LINT ?= $(CURDIR)/bin/golangci-lint

## run: build bin/sagacity (showing each package compiled: the first build takes a few minutes) and serve the console on 127.0.0.1:8080 with the embedded store and demo data
run:
	@echo "make run: downloading modules and building $(BIN); each package is listed as it compiles (the first time takes minutes, then seconds)" >&2
	$(GO) build -v -ldflags='$(LDFLAGS)' -o $(BIN) ./cmd/web
	SAGACITY_DEMO=$${SAGACITY_DEMO:-true} ./$(BIN) serve

## test: check formatting and vet, then run every test with the race detector; the last lines count passes, failures and skips, naming each skipped test and why (under CI=1 a skip fails)
# The binaries the suites run (sagacity for internal/e2e, mailpit for the
# email tests) are built once here, into TESTBIN, and named to the tests by
# environment; go test alone builds them itself. A package may take up to
# TESTTIMEOUT (go test's default, 10m, is too close on a loaded 2-core
# machine for the application suites).
TESTBIN ?= bin/test
TESTTIMEOUT ?= 15m
test: check
	$(GO) build -o $(TESTBIN)/sagacity ./cmd/web
	$(GO) build -o $(TESTBIN)/mailpit github.com/axllent/mailpit
	SAGACITY_TEST_BINARY=$(abspath $(TESTBIN))/sagacity SAGACITY_TEST_MAILPIT=$(abspath $(TESTBIN))/mailpit \
	  $(GOTESTSUM) --format pkgname-and-test-fails --format-hide-empty-pkg -- -race -count=1 -timeout $(TESTTIMEOUT) $(PKGS)

## lint: golangci-lint with .golangci.yml (the default linters plus bodyclose, errorlint, gocritic and gosec), tests included, of the product, its public modules and the benchmark harness
lint: $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run ./...
	for m in $(MODULES) bench; do (cd $$m && $(GOLANGCI_LINT) run ./...) || exit 1; done

$(CURDIR)/bin/golangci-lint: tools/go.mod tools/go.sum
	$(GO) -C tools build -o ../bin/golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint

## fuzz: run every fuzz target for FUZZTIME on its committed corpus (testdata/fuzz) and new inputs
# Go 1.26's fuzzing coordinator can end a run that found nothing with
# "context deadline exceeded" at the deadline (golang/go#75804, fixed in
# 1.27): such a run wrote no failing input and is not a failure; any run
# that wrote one, or failed otherwise, is.
FUZZTIME ?= 10s
fuzz:
	@out=$$(mktemp); trap 'rm -f $$out' EXIT; \
	for f in $$(grep -rl --include='*_test.go' '^func Fuzz' .); do \
	  for fn in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
	    echo "fuzz $$(dirname $$f) $$fn for $(FUZZTIME)"; \
	    if ! $(GO) -C $$(dirname $$f) test . -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) >$$out 2>&1; then \
	      if grep -q 'context deadline exceeded' $$out && ! grep -q 'Failing input written' $$out; then \
	        echo "  (the run ended with golang/go#75804's spurious deadline; no failing input was found)"; \
	      else \
	        cat $$out >&2; echo "$$fn failed: the failing input is in $$(dirname $$f)/testdata/fuzz/$$fn" >&2; exit 1; \
	      fi; \
	    fi; \
	  done; \
	done

## build: a static binary in bin/
build: generate
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='$(LDFLAGS)' -o $(BIN) ./cmd/web

## generate: regenerate generated code (templ)
generate:
	$(GO) generate ./...

## check: gofmt and go vet, of the product, of each public module on its own go.mod, and of the benchmark harness (bench/, a module of its own)
check: generate
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	for m in $(MODULES) bench; do (cd $$m && $(GO) vet ./...) || exit 1; done

## bench: benchmarks on SQLite and PostgreSQL: throughput, latency, and what receipts and the global log cost; then the comparison with pgx, DBOS and raw SHA-256, the log check of SQLite stores of 1M and 10M entries, growth and HTTP (bench/, a module of its own, about 5 minutes; its first run also seeds those stores in $TMPDIR, about 5 minutes and 5 GB, once), written to BENCHMARKS.md; BENCHFLAGS passes flags to it (cd bench && go run . -h)
BENCHFLAGS ?=
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	cd bench && $(GO) run . -out ../BENCHMARKS.md $(BENCHFLAGS)

## htmx: re-vendor htmx from the npm package htmx.org (commit the result)
htmx:
	tmp=$$(mktemp -d) && cd $$tmp && npm pack --silent htmx.org@$(HTMX_VERSION) >/dev/null && \
	  tar xzf htmx.org-$(HTMX_VERSION).tgz && cp package/dist/htmx.min.js $(CURDIR)/web/static/htmx.min.js && \
	  echo "htmx.min.js  npm htmx.org@$(HTMX_VERSION)  sha256 $$(sha256sum package/dist/htmx.min.js | cut -d' ' -f1)  (make htmx)" > $(CURDIR)/web/static/VERSIONS && \
	  rm -rf $$tmp

## axe: re-vendor axe-core (the browser tests' accessibility check) from npm (commit the result)
axe:
	tmp=$$(mktemp -d) && cd $$tmp && npm pack --silent axe-core@$(AXE_VERSION) >/dev/null && \
	  tar xzf axe-core-$(AXE_VERSION).tgz && cp package/axe.min.js $(CURDIR)/internal/app/testdata/axe.min.js && \
	  echo "axe.min.js  npm axe-core@$(AXE_VERSION)  sha256 $$(sha256sum package/axe.min.js | cut -d' ' -f1)  (make axe; used by the browser tests only, never served)" > $(CURDIR)/internal/app/testdata/VERSIONS && \
	  rm -rf $$tmp

## screenshots: PNGs of the console's main pages, from the demo data, into docs/
screenshots:
	$(GO) test -count=1 -run '^TestScreenshots$$' ./internal/app -screenshots=$(CURDIR)/docs

clean:
	rm -rf bin
