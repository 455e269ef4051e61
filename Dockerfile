# syntax=docker/dockerfile:1
#
# sked in a container: a static binary running as an unprivileged user, with
# its SQLite database on the /data volume. Two flavours of one image:
#
#   docker build -t sked .                                 # distroless (default)
#   docker build --build-arg FLAVOUR=debian -t sked:debian .
#
# distroless has sked and CA certificates and nothing else: no shell, no
# coreutils. Use it for http jobs, for a server whose exec jobs run on remote
# `sked work` machines, and for `sked work` itself when its command is a
# static binary you add.
# debian (Debian slim) adds a shell, coreutils and apt: use it when exec jobs
# run inside the container (`sh -c '…'`, scripts), and build your own image
# FROM it to add the tools those commands need.
#
# Stamp the version (the build context has no .git):
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse HEAD) -t sked .
#
#   docker run -d -p 8080:8080 -v sked-data:/data -e SKED_TOKEN=change-me sked
#
# Inside the container sked listens on 0.0.0.0:8080, beyond loopback, so it
# refuses to start without a token: set SKED_TOKEN (several tokens may be
# given comma-separated; clients send "Authorization: Bearer <token>"), or
# set SKED_INSECURE=true if something in front of it does the
# authentication (then SKED_ALLOWED_HOSTS=name,… lists the Host names it
# answers besides localhost). /healthz and /readyz never need the token.
# Other settings are SKED_… variables too: SKED_WORKERS, SKED_ENABLE_EXEC,
# SKED_RETENTION, SKED_LOG_FORMAT=json, … (see `sked serve -h`).
# docker-compose.yml is a complete example.
#
# Backup while it runs: docker exec <container> sked backup /data/backup.db

ARG FLAVOUR=distroless

# Cross-compiled on the build machine's platform for the target's.
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION COMMIT DATE TARGETOS TARGETARCH TARGETVARIANT
RUN GOOS=$TARGETOS GOARCH=$TARGETARCH GOARM=${TARGETVARIANT#v} sh scripts/build.sh /out/sked \
    && mkdir -p /out/data

# The distroless image's nonroot user is 65532.
FROM gcr.io/distroless/static-debian12:nonroot AS base-distroless

FROM debian:bookworm-slim AS base-debian
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 65532 nonroot \
    && useradd --uid 65532 --gid 65532 --home-dir /data --no-create-home --shell /bin/sh nonroot

FROM base-${FLAVOUR}
COPY --from=build /out/sked /usr/local/bin/sked
# The nonroot user (65532) owns /data, so a fresh named volume is writable.
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
VOLUME /data
WORKDIR /data
ENV SKED_DB=/data/sked.db SKED_ADDR=0.0.0.0:8080 SKED_LOG_FORMAT=json
EXPOSE 8080
# No curl in either flavour: sked checks itself.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/sked", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/sked"]
CMD ["serve"]
