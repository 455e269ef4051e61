# syntax=docker/dockerfile:1
#
# sked in a container: a static binary on distroless, running as an
# unprivileged user, with its SQLite database on the /data volume.
#
#   docker build -t sked .
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
#
# Backup while it runs: docker exec <container> sked backup /data/backup.db

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/sked . \
    && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sked /usr/local/bin/sked
# The nonroot user (65532) owns /data, so a fresh named volume is writable.
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
VOLUME /data
WORKDIR /data
ENV SKED_DB=/data/sked.db SKED_ADDR=0.0.0.0:8080 SKED_LOG_FORMAT=json
EXPOSE 8080
# No shell or curl in the image: sked checks itself.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/sked", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/sked"]
CMD ["serve"]
