# Sourced by build.sh and components.sh: the rustc flags that keep paths out of the binaries (this
# checkout becomes /snow-connect, the cargo home /cargo), as a TOML list's items for --config.
remap="\"--remap-path-prefix=$PWD=/snow-connect\",\"--remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo\""
