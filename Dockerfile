# syntax=docker/dockerfile:1
# olm-rs: one static binary for the controller, the catalog server and the CLI tools.
#
#   docker build -t olm-rs:dev .
#   docker run --rm olm-rs:dev version
#
# The runtime image is distroless "static" (no shell, no package manager, ~2 MB), runs as the
# non-root user 65532 and writes nothing to its filesystem, so it runs with
# readOnlyRootFilesystem. The same image serves a catalog: `olm-rs catalog serve /configs`.

FROM rust:1.95-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/* \
 && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
# The `image` profile (Cargo.toml) optimises for size; --no-default-features leaves out the
# `sandbox` feature (the embedded API server behind `olm-rs sandbox`, for development only).
# Cache mounts keep the registry and the dependency builds between image builds.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --profile image --no-default-features --locked \
      --target x86_64-unknown-linux-musl --bin olm-rs \
 && cp target/x86_64-unknown-linux-musl/image/olm-rs /olm-rs

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /olm-rs /usr/local/bin/olm-rs
USER 65532:65532
EXPOSE 8080 50051
ENTRYPOINT ["/usr/local/bin/olm-rs"]
CMD ["run"]
