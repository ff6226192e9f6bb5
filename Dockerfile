# Build a static operator binary, then ship it alone on a distroless base
# that runs as a non-root user.
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /workspace
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -trimpath -ldflags "-s -w" -o profile-scheduler .

FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /workspace/profile-scheduler .
USER 65532:65532
ENTRYPOINT ["/profile-scheduler"]
