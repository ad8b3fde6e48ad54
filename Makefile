# Sagacity for Go. `make run` and `make test` are all a newcomer needs.

GO      ?= go
BIN     ?= bin/sagacity
PKGS    ?= ./...

.PHONY: run test build generate check bench clean

## run: serve the console on 127.0.0.1:8080 with the embedded store
run:
	SAGACITY_DEMO=$${SAGACITY_DEMO:-true} $(GO) run ./cmd/web serve

## test: check formatting and vet, then run every test with the race detector
test: check
	$(GO) test -race -count=1 $(PKGS)

## build: a static binary in bin/
build: generate
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN) ./cmd/web

## generate: regenerate generated code (templ)
generate:
	$(GO) generate ./...

## check: gofmt and go vet
check: generate
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

## bench: benchmarks (throughput and latency on SQLite and PostgreSQL)
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

clean:
	rm -rf bin
