# syntax=docker/dockerfile:1
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/sked .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sked /usr/local/bin/sked
VOLUME /data
WORKDIR /data
ENV SKED_DB=/data/sked.db SKED_ADDR=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/sked"]
CMD ["serve"]
