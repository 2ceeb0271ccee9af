# Cross-compiling for aarch64 Linux/Android with Debian 12's g++-aarch64-linux-gnu and the arm64
# multiarch packages (liburing-dev:arm64, libpcre2-dev:arm64): scripts/build-aarch64.sh.
# The result is linked statically so that one file runs on any aarch64 Linux kernel, Android's
# included, without a sysroot or a loader (Android's bionic loader cannot run a glibc binary).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Multiarch: libraries live in /usr/lib/aarch64-linux-gnu beside the host's; there is no sysroot.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# pkg-config must see only the arm64 .pc files (liburing, libpcre2-8), never the host's.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# Static (CMakeLists.txt: EMBER_STATIC makes find_library and pkg-config's targets pick the .a
# archives and links with -static).
set(EMBER_STATIC ON CACHE BOOL "Link the executables statically (glibc included)")

# Header-only packages (Boost.Beast/Asio, nlohmann_json, doctest, CLI11) are used as installed for
# the host: their CMake package files are architecture-independent, but Boost's sit in the host's
# multiarch folder, which CMAKE_LIBRARY_ARCHITECTURE above hides.
set(Boost_DIR "/usr/lib/x86_64-linux-gnu/cmake/Boost-1.81.0" CACHE PATH "header-only Boost (host copy)")

# Test binaries are run through qemu by ctest when it is asked to (scripts/test-aarch64.sh runs
# them itself, once per emulated CPU).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 CACHE STRING "")
