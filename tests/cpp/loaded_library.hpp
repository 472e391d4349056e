// A shared library opened for a test and closed with it: handle is null when it does not load
// (dlerror() says why); get<F>(symbol) is null when the symbol is absent, text(symbol) calls a
// `const char* f()` export and gives "" when there is none.
#pragma once

#include <dlfcn.h>

#include <string>

namespace kcv::testing {

struct LoadedLibrary {
    void* handle = nullptr;
    explicit LoadedLibrary(const std::string& path) { handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL); }
    ~LoadedLibrary() {
        if (handle) dlclose(handle);
    }
    LoadedLibrary(const LoadedLibrary&) = delete;
    LoadedLibrary& operator=(const LoadedLibrary&) = delete;
    template <class F>
    F get(const char* symbol) const {
        return reinterpret_cast<F>(dlsym(handle, symbol));
    }
    std::string text(const char* symbol) const {
        auto f = get<const char* (*)()>(symbol);
        return f ? f() : "";
    }
};

}  // namespace kcv::testing
