# One image for the services: `kerf webhook`, `kerf reconciler` and `kerf recommend` (the
# manifests pick the command). Build with `make image` (docker or podman).
#
# Stage 1 builds kerf's wheel and installs it with its runtime dependencies into a
# virtualenv; stage 2 copies only that virtualenv onto the same slim base, so no build
# tool, compiler, source tree or test extra reaches the final image.
# Fully qualified: podman does not guess registries for short names.
ARG PYTHON_IMAGE=docker.io/library/python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
# mypyc's compiler for the admission path (setup.py); the base holds Python's headers.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY kerf/ kerf/
COPY app/ app/
COPY webhook/ webhook/
COPY reconciler/ reconciler/
COPY recommender/ recommender/
COPY scripts/image-install.sh /usr/local/bin/image-install.sh
RUN sh /usr/local/bin/image-install.sh /src /opt/kerf

FROM ${PYTHON_IMAGE}
# Same base as the build stage, so the virtualenv's interpreter path stays valid.
COPY --from=build /opt/kerf /opt/kerf
# A read-only root filesystem: never write byte code, log unbuffered to stderr, and keep
# HOME on the one writable mount the manifests give (an emptyDir at /tmp).
ENV PATH=/opt/kerf/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
WORKDIR /
# A numeric UID:GID (the manifests' runAsUser), so runAsNonRoot can verify it.
USER 65532:65532
ENTRYPOINT ["kerf"]
CMD ["--help"]
