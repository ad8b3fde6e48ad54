# Build a static binary (the SQLite driver is pure Go, so CGO is off) and
# ship it alone on a distroless base.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t sagacity .
#   docker run -v sagacity-data:/data -p 8080:8080 -e SAGACITY_AUTH=tokens … sagacity
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
# The public modules go.mod replaces by their directories: go mod download
# reads their go.mod files.
COPY client/go.mod client/
COPY evidence/go.mod evidence/
COPY internal/parallel/go.mod internal/parallel/
COPY toolsig/go.mod toolsig/
COPY wire/go.mod wire/
RUN go mod download
COPY . .
# The build context has no .git (see .dockerignore): the version comes in
# as an argument.
ARG VERSION=devel
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.buildVersion=${VERSION}" -o /out/sagacity ./cmd/web && \
    mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sagacity /sagacity
# /data holds the embedded SQLite database (the default store) and, in dev
# mode, its signing key and checkpoints: mount a volume there, or it is
# lost when the container is re-created. With PostgreSQL nothing is kept in
# the container; keep SAGACITY_CHECKPOINT_DIR on a volume of its own.
COPY --from=build --chown=nonroot:nonroot /out/data /data
VOLUME ["/data"]
ENV SAGACITY_ADDR=0.0.0.0:8080 \
    SAGACITY_DATABASE_URL=sqlite:/data/sagacity.db
EXPOSE 8080
USER nonroot
# distroless has no curl: the binary asks its own /readyz.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 CMD ["/sagacity", "healthcheck"]
ENTRYPOINT ["/sagacity"]
CMD ["serve"]
