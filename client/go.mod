module github.com/sagacity-go/sagacity/client

go 1.26.0

require (
	github.com/sagacity-go/sagacity/evidence v0.1.0
	github.com/sagacity-go/sagacity/wire v0.1.0
	golang.org/x/mod v0.42.0
)

require (
	cel.dev/expr v0.25.1 // indirect
	github.com/antlr4-go/antlr/v4 v4.13.1 // indirect
	github.com/fxamacker/cbor/v2 v2.9.4 // indirect
	github.com/go-jose/go-jose/v4 v4.1.9 // indirect
	github.com/go-viper/mapstructure/v2 v2.5.0 // indirect
	github.com/go-webauthn/webauthn v0.18.2 // indirect
	github.com/go-webauthn/x v0.3.1 // indirect
	github.com/golang-jwt/jwt/v5 v5.3.1 // indirect
	github.com/google/cel-go v0.31.0 // indirect
	github.com/google/go-tpm v0.9.8 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/philhofer/fwd v1.2.0 // indirect
	github.com/sagacity-go/sagacity/internal/parallel v0.1.0 // indirect
	github.com/tinylib/msgp v1.6.4 // indirect
	github.com/transparency-dev/merkle v0.0.2 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/exp v0.0.0-20240823005443-9b4947da3948 // indirect
	golang.org/x/sys v0.48.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20240826202546-f6391c0de4c7 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20240826202546-f6391c0de4c7 // indirect
	google.golang.org/protobuf v1.36.10 // indirect
)

// This tree's modules, when this one is built here; a module that
// requires this one uses the versions required above.
replace (
	github.com/sagacity-go/sagacity/evidence => ../evidence
	github.com/sagacity-go/sagacity/internal/parallel => ../internal/parallel
	github.com/sagacity-go/sagacity/wire => ../wire
)
