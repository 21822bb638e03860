# kafka-group-broker images (docs/docker.md).
#
#   docker build -t kafka-group-broker .                      # the broker (the default, last stage): small, no compilers
#   docker build --target demo -t kafka-group-broker-demo .   # + aiokafka, kafka-python, confluent-kafka (compose.yaml)
#   docker run --rm -p 19092:19092 -p 127.0.0.1:9644:9644 kafka-group-broker   # clients on the host: localhost:19092
#
# Every setting is a GROUP_BROKER_* environment variable (the settings table in README.md). No compiler is needed
# at any stage: every dependency ships wheels (the build stages have binutils, to strip debug symbols off them).
# Pip reads its usual settings at build time, e.g. `--build-arg PIP_INDEX_URL=https://mirror.example/simple`.
# No `# syntax=` line and no BuildKit-only instruction: the classic builder builds this file too.

ARG PYTHON_VERSION=3.12
ARG PYTHON_IMAGE=python:${PYTHON_VERSION}-slim

# -- requirements: the dependency lists from pyproject.toml (the layers below change only when these do) --------
FROM ${PYTHON_IMAGE} AS requirements
COPY pyproject.toml /src/
RUN python -c "import tomllib; p = tomllib.load(open('/src/pyproject.toml', 'rb'))['project']; \
open('/src/requirements.txt', 'w').write('\n'.join(p['dependencies'])); \
open('/src/clients.txt', 'w').write('\n'.join(p['optional-dependencies']['clients'])); \
open('/src/build.txt', 'w').write('\n'.join(tomllib.load(open('/src/pyproject.toml', 'rb'))['build-system']['requires']))"

# -- deps: a virtual environment with the broker's dependencies ---------------------------------------------------
FROM ${PYTHON_IMAGE} AS deps
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore
# strip: the wheels' extension modules carry debug symbols (uvloop's alone is 13 MB, 1.6 MB without them).
RUN apt-get update && apt-get install -y --no-install-recommends binutils && rm -rf /var/lib/apt/lists/*
# The venv has no pip of its own: the base image's pip installs into it (`pip --python`), and stays out of it.
RUN python -m venv --without-pip /opt/venv
COPY --from=requirements /src/requirements.txt /src/
RUN pip --python /opt/venv/bin/python install -r /src/requirements.txt

# -- demo-deps: + the client libraries of the `clients` extra ----------------------------------------------------
FROM deps AS demo-deps
COPY --from=requirements /src/clients.txt /src/
RUN pip --python /opt/venv/bin/python install -r /src/clients.txt

# -- wheel: the project itself -----------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS wheel
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore
# The build backend once, in a cached layer, rather than in a fresh isolated environment at every code change.
COPY --from=requirements /src/build.txt /src/
RUN python -m venv /opt/build && /opt/build/bin/pip install -r /src/build.txt
COPY pyproject.toml README.md /src/
COPY protocol /src/protocol
COPY broker /src/broker
RUN /opt/build/bin/pip wheel --no-build-isolation --no-deps --wheel-dir /wheels /src

# Only Python extension modules are stripped: the C libraries some wheels bundle (patched by auditwheel) are left
# alone.
FROM deps AS venv
COPY --from=wheel /wheels /wheels
RUN pip --python /opt/venv/bin/python install --no-deps /wheels/*.whl \
    && find /opt/venv \( -name '*.cpython-*.so' -o -name '*.abi3.so' \) -exec strip --strip-unneeded {} +

FROM demo-deps AS demo-venv
COPY --from=wheel /wheels /wheels
RUN pip --python /opt/venv/bin/python install --no-deps /wheels/*.whl \
    && find /opt/venv \( -name '*.cpython-*.so' -o -name '*.abi3.so' \) -exec strip --strip-unneeded {} +

# -- runtime: what both images share: the base Python, a user, the settings -------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
RUN groupadd --gid 10001 broker \
    && useradd --uid 10001 --gid broker --no-create-home --home-dir /var/lib/group-broker --shell /usr/sbin/nologin \
        broker \
    && mkdir -p /var/lib/group-broker/data && chown -R broker:broker /var/lib/group-broker
WORKDIR /var/lib/group-broker
# /var/lib/group-broker/data is made here, owned by the broker user, so that a named volume mounted on it (compose.yaml:
# GROUP_BROKER_DATA_DIR) starts with that owner; the image itself stays memory-only unless the variable is set.
# Two listeners, as Kafka users know them: INTERNAL for other containers (`broker:9092` in compose.yaml, where the
# service is named broker) and EXTERNAL for clients on the host through a published port (`-p 19092:19092`:
# bootstrap localhost:19092). Each listener returns its own advertised address in Metadata and FindCoordinator.
# Outside compose, set GROUP_BROKER_ADVERTISED_LISTENERS to names that resolve where your clients run.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    GROUP_BROKER_LISTENERS=INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:19092 \
    GROUP_BROKER_ADVERTISED_LISTENERS=INTERNAL://broker:9092,EXTERNAL://localhost:19092 \
    GROUP_BROKER_ADMIN_HOST=0.0.0.0 \
    GROUP_BROKER_ADMIN_PORT=9644 \
    GROUP_BROKER_LOG_FORMAT=json
USER broker
ENTRYPOINT ["group-broker"]
CMD ["serve"]

# -- demo: the broker plus the client libraries, for compose.yaml's producer, consumers and chaos service --------
FROM runtime AS demo
COPY --from=demo-venv /opt/venv /opt/venv
ENV GROUP_BROKER_ADMIN_URL=http://broker:9644

# -- broker: the default image ------------------------------------------------------------------------------------
FROM runtime AS broker
COPY --from=venv /opt/venv /opt/venv
EXPOSE 9092 19092 9644
# Asks the broker itself: an ApiVersions round trip on its Kafka listener(s) and /readyz on the control API.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["group-broker", "health"]
