# The e2e catalog image: olm-rs's own image serving the file-based catalog in e2e/catalog.
# Any FBC directory becomes a catalog image the same way — no opm, no separate base image:
#
#   docker build -t my-catalog:v1 --build-arg OLM_RS_IMAGE=olm-rs:dev -f e2e/catalog.Dockerfile e2e
#
# A CatalogSource with `image: my-catalog:v1` then runs it as its registry pod (gRPC on 50051).
ARG OLM_RS_IMAGE=olm-rs:dev
FROM ${OLM_RS_IMAGE}
COPY catalog /configs
# opm's label for "where the FBC lives in this image".
LABEL operators.operatorframework.io.index.configs.v1=/configs
EXPOSE 50051
ENTRYPOINT ["/usr/local/bin/olm-rs"]
CMD ["catalog", "serve", "/configs"]
