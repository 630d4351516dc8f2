# Builds the actledger and mocksupplier binaries into a small image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /out/ ./cmd/...

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/ /usr/local/bin/
COPY demo/providers.yaml /etc/actledger/providers.yaml
ENTRYPOINT ["/usr/local/bin/actledger"]
CMD ["serve"]
