# The pinstore binary in a small image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /pinstore ./cmd/pinstore

# The binary with the mariadb client tools beside it, for the commands that
# run them (pinstore replica add copies with mariadb-dump and mariadb).
FROM debian:bookworm-slim AS tools
RUN apt-get update && apt-get install -y --no-install-recommends mariadb-client && rm -rf /var/lib/apt/lists/*
COPY --from=build /pinstore /pinstore
ENTRYPOINT ["/pinstore"]

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /pinstore /pinstore
ENTRYPOINT ["/pinstore"]
CMD ["serve"]
