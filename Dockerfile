# The hub's image: `docker build -t elicithub .` (any Debian-like base with python3 >= 3.11 on PATH: --build-arg BASE=...).
ARG BASE=python:3.12-slim

FROM ${BASE} AS build
ARG UV_VERSION=0.13.9
# Compiled bytecode: the hub runs on a read-only root filesystem, where Python could not write it later.
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON=python3 \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/opt/elicithub \
    UV_NO_CACHE=1
RUN python3 -m venv /opt/uv && /opt/uv/bin/pip install --no-cache-dir "uv==${UV_VERSION}"
WORKDIR /src
# Dependencies before the source: a change to src/ reuses the layer holding them.
COPY pyproject.toml uv.lock README.md ./
RUN /opt/uv/bin/uv sync --frozen --no-dev --extra fast --extra otel --extra teams --no-install-project
COPY src ./src
RUN /opt/uv/bin/uv sync --frozen --no-dev --extra fast --extra otel --extra teams --no-editable

FROM ${BASE}
# /var/lib/elicithub is where a volume holding a generated master key goes (deploy/compose.yaml): a new volume takes
# the owner of the directory it is mounted on, so the hub's user may write the key there.
RUN useradd --uid 10001 --user-group --no-log-init --home-dir /data --create-home --shell /usr/sbin/nologin elicithub \
    && install --directory --owner elicithub --group elicithub --mode 700 /var/lib/elicithub
COPY --from=build /opt/elicithub /opt/elicithub
ENV PATH=/opt/elicithub/bin:$PATH \
    PYTHONUNBUFFERED=1
# The embedded SQLite store and the generated key file land under the working directory.
WORKDIR /data
USER 10001
EXPOSE 8700
ENTRYPOINT ["elicithub"]
CMD ["serve", "--host", "0.0.0.0"]
