# The executor image: the CLI on Node 24, as `kube-runbook manifests` Jobs and deploy/argo run it.
#   docker build -t ghcr.io/kube-runbook/kube-runbook:0.1.0 .
FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# the lockfile names the workspace (packages/lab), whose package.json npm ci needs; the lab itself is not built here
COPY packages/lab/package.json ./packages/lab/
RUN npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY bin ./bin
COPY schema ./schema
COPY runbooks ./runbooks
COPY examples ./examples
COPY docs ./docs
COPY README.md ./
RUN npx tsc -p tsconfig.build.json && npm pack --ignore-scripts --pack-destination /tmp

FROM node:24-bookworm-slim
# ssh for the inventories that reach nodes by ssh; iproute2 for `transport: netns` (lab) inventories
RUN apt-get update && apt-get install -y --no-install-recommends openssh-client iproute2 ca-certificates \
  && rm -rf /var/lib/apt/lists/*
COPY --from=build /tmp/kube-runbook-*.tgz /tmp/
RUN npm install -g --omit=dev /tmp/kube-runbook-*.tgz && rm /tmp/kube-runbook-*.tgz && npm cache clean --force
ENV KUBE_RUNBOOK_STATE_DIR=/var/lib/kube-runbook
RUN mkdir -p /var/lib/kube-runbook && chown 1000:1000 /var/lib/kube-runbook
# numeric, so that runAsNonRoot (the Job of `kube-runbook manifests`) can check it
USER 1000:1000
ENTRYPOINT ["kube-runbook"]
