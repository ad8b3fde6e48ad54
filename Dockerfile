# Build a static binary (the SQLite driver is pure Go, so CGO is off) and
# ship it alone on a distroless base.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/sagacity ./cmd/web

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sagacity /sagacity
ENV SAGACITY_ADDR=0.0.0.0:8080
EXPOSE 8080
USER nonroot
ENTRYPOINT ["/sagacity"]
CMD ["serve"]
