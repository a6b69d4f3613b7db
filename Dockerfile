# syntax=docker/dockerfile:1
# captchaflow's four binaries (worker, ingress, starter, simulator) in one small image that runs as a non-root
# user. Pick the binary with the command: `docker run IMAGE ingress` (docker-compose.yml does this per service).

FROM golang:1.26.8 AS build
WORKDIR /src
# Modules first, so this layer (and the cache mount) survives source-only changes.
COPY go.mod go.sum ./
COPY tests/go.mod tests/go.sum ./tests/
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
# Static binaries (no cgo) so the runtime image needs no libc of a matching version. TARGETOS/TARGETARCH come
# from buildx and let one Dockerfile build every platform. The simulator is in the tooling module (tests/).
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    export CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    && go build -trimpath -ldflags="-s -w" -o /out/ ./worker ./ingress ./starter \
    && go -C tests build -trimpath -ldflags="-s -w" -o /out/ ./simulator

# Alpine rather than distroless: the compose health checks need busybox's wget. It also ships the CA bundle
# the worker needs for the provider's HTTPS API.
FROM alpine:3.22.2
RUN addgroup -S -g 10001 captchaflow \
    && adduser -S -D -H -u 10001 -G captchaflow -s /sbin/nologin captchaflow
COPY --from=build /out/ /usr/local/bin/
USER 10001:10001
CMD ["worker"]
