# The release build every package is made from (scripts/install, package-deb, package-wheel):
# the static Swift standard library, in .build-static (or PARLA_RELEASE_SCRATCH: scripts/test
# builds on a tmpfs), with one set of flags for every product.
# libparla (parla-c) needs -static-stdlib and the static libraries' directory itself (SwiftPM
# links the standard library statically into executables only); the executables are built
# with the same flags, which they do not need, so that the four products share one build: with
# libparla's flags alone, its build compiled every module a second time (about 5 minutes of
# package-deb's 11 on 2 cores).
#   source scripts/lib/release-build.sh; release_build PRODUCT...; bin=$(release_bin)
release_static_libs="$(dirname "$(readlink -f "$(command -v swift)")")/../lib/swift_static/linux"
release_scratch=${PARLA_RELEASE_SCRATCH:-.build-static}
release_flags=(-c release --static-swift-stdlib --scratch-path "$release_scratch" -Xswiftc -static-stdlib -Xlinker -L"$release_static_libs")
release_build() {
  local product
  for product in "$@"; do
    swift build "${release_flags[@]}" --product "$product" 2>&1 | grep -v "prohibited flag" >&2
    [ "${PIPESTATUS[0]}" -eq 0 ] || return 1
  done
}
release_bin() { swift build "${release_flags[@]}" --show-bin-path; }
