# syntax=docker/dockerfile:1
# kube-apf-proxy: a small, non-root image with the release binary and the example configuration.
#   docker build -t kube-apf-proxy:0.1.0 .
#   docker run --rm kube-apf-proxy:0.1.0 check --config-dir /etc/kube-apf-proxy/config

FROM rust:1.95-bookworm AS builder
WORKDIR /src
# The manifest declares benches, so Cargo wants their files even for a release build.
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY benches ./benches
# The registry and target caches speed up rebuilds; the binary is copied out of the cache mount.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin kube-apf-proxy \
    && install -D -m 0755 target/release/kube-apf-proxy /out/kube-apf-proxy

# glibc and libgcc only (TLS is rustls with ring, no OpenSSL); runs as uid/gid 65532 "nonroot".
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /out/kube-apf-proxy /usr/local/bin/kube-apf-proxy
COPY config/ /etc/kube-apf-proxy/config/
USER 65532:65532
# 8443: the proxy (--secure-port); 8081: /metrics, health and debug (--admin-address).
EXPOSE 8443 8081
ENTRYPOINT ["/usr/local/bin/kube-apf-proxy"]
CMD ["serve", "--config-dir=/etc/kube-apf-proxy/config", "--admin-address=0.0.0.0:8081"]
