# One image for every dirigent process: `dirigent operator | api | worker | migrate | dev`.
#
# BASE_IMAGE must provide Python 3.11 with venv at /usr/bin/python3 or /usr/local/bin/python3:
# an official `python:3.11-slim-bookworm` where a registry is reachable, or the Debian base
# `make image` builds from packages with mmdebstrap (hack/image/build.sh). Both stages use the
# same base, so the virtualenv's interpreter link stays valid in the final image.
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
ARG UV_VERSION=0.13.9
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    UV_PYTHON_DOWNLOADS=never \
    UV_LINK_MODE=copy \
    UV_COMPILE_BYTECODE=1 \
    UV_PROJECT_ENVIRONMENT=/opt/dirigent
# The host's CA bundle may be bind-mounted here for the build only (hack/image/build.sh).
RUN python3 -m venv /opt/uv \
 && SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt /opt/uv/bin/pip install --quiet "uv==${UV_VERSION}"
WORKDIR /src
# Lock and member metadata first: the dependency layer is reused until they change.
COPY pyproject.toml uv.lock ./
COPY blocks/sdk/pyproject.toml blocks/sdk/
COPY blocks/builtin/pyproject.toml blocks/builtin/
COPY engine/pyproject.toml engine/
COPY api/pyproject.toml api/
COPY operator/pyproject.toml operator/
COPY cli/pyproject.toml cli/
COPY storage/s3/pyproject.toml storage/s3/
COPY tests/plugin/pyproject.toml tests/plugin/
RUN SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    /opt/uv/bin/uv sync --frozen --no-dev --no-install-workspace --python python3
COPY blocks blocks
COPY engine engine
COPY api api
COPY operator operator
COPY cli cli
COPY storage storage
RUN SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    /opt/uv/bin/uv sync --frozen --no-dev --no-editable --python python3 \
 && /opt/dirigent/bin/dirigent --help >/dev/null

FROM ${BASE_IMAGE}
ARG VERSION=0.0.0
LABEL org.opencontainers.image.title="dirigent" \
      org.opencontainers.image.description="Kubernetes-native pipeline orchestrator: operator, API, worker, migrations" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
# A fixed numeric non-root user, so `runAsNonRoot` can be checked without a passwd lookup.
RUN (groupadd --system --gid 10001 dirigent || addgroup --system --gid 10001 dirigent) \
 && (useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/dirigent --no-create-home \
       --shell /usr/sbin/nologin dirigent \
     || adduser --system --uid 10001 --ingroup dirigent --home /var/lib/dirigent --no-create-home dirigent) \
 && mkdir -p /var/lib/dirigent/artifacts \
 && chown -R 10001:10001 /var/lib/dirigent
COPY --from=build /opt/dirigent /opt/dirigent
ENV PATH=/opt/dirigent/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/var/lib/dirigent \
    DIRIGENT_LOG_FORMAT=json \
    DIRIGENT_ARTIFACT_ROOT=/var/lib/dirigent/artifacts
WORKDIR /var/lib/dirigent
USER 10001:10001
EXPOSE 8080 9443 9464
ENTRYPOINT ["dirigent"]
CMD ["--help"]
