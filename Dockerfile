# pykured container image: a drop-in for ghcr.io/kubereboot/kured (kured 1.23.0's Dockerfile and manifests).
#
# What kured's manifests and chart rely on, and how this image provides it:
#   * /usr/bin/kured is the entry point (manifests use `command: [/usr/bin/kured]`): a symlink to the
#     console script pip installs at /usr/local/bin/kured.
#   * /usr/bin/nsenter for --reboot-command / --reboot-sentinel-command (util-linux), tzdata for
#     --time-zone (Python's zoneinfo reads /usr/share/zoneinfo), CA certificates for notifications and
#     Prometheus over HTTPS.
#   * readOnlyRootFilesystem: every module is byte-compiled at build time and PYTHONDONTWRITEBYTECODE=1,
#     so Python never tries to write __pycache__ at run time.
#   * The image runs as root, as kured's does: entering PID 1's mount namespace (nsenter) and signalling
#     PID 1 need root with hostPID. The unprivileged variant is a pod securityContext matter
#     (kustomize/overlays/signal: privileged false, only CAP_KILL); the central FleetLock Deployment
#     runs as an unprivileged uid.
# No compiler or build tool reaches the final stage: every dependency ships wheels, and the builder stage
# only runs pip and compileall.

FROM python:3.11-slim-bookworm AS builder
WORKDIR /src
# .dockerignore limits the context to pyproject.toml, README.md and pykured/.
COPY . .
RUN pip install --no-cache-dir --no-compile --prefix=/install . \
 && python -m compileall -q -j 0 --invalidation-mode unchecked-hash /install

FROM python:3.11-slim-bookworm
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="pykured" \
      org.opencontainers.image.description="Kubernetes reboot daemon, a drop-in Python replacement for kured" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends util-linux tzdata ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=builder /install /usr/local
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN ln -s /usr/local/bin/kured /usr/bin/kured \
 && /usr/bin/nsenter --version >/dev/null \
 && /usr/bin/kured --help >/dev/null
ENTRYPOINT ["/usr/bin/kured"]
