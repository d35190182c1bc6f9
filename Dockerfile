# The pinstore binary in a small image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /pinstore ./cmd/pinstore

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /pinstore /pinstore
ENTRYPOINT ["/pinstore"]
CMD ["serve"]
