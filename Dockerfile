# The gpuledger image: a static binary on distroless, run as a non-root user.
# Built reproducibly from the repository (no network after the module
# download; -trimpath; the version from the build argument):
#   docker build --build-arg VERSION=$(git describe --tags --always) -t gpuledger .
# The binary is built by `make static`, which CI runs the same way when no
# image builder is available.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN make static VERSION=${VERSION}

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/bin/gpuledger-static /usr/local/bin/gpuledger
USER 65532:65532
EXPOSE 8080 9402
ENTRYPOINT ["/usr/local/bin/gpuledger"]
CMD ["serve", "-config", "/etc/gpuledger/cluster.yaml", "-http.listenAddr", ":8080"]
