/* A stand-in for the CUDA driver (libcuda.so.1) with the calls rankmap's
 * profiler asks of a loaded driver: 4 devices on PCI buses 0x18, 0x2a,
 * 0x3b, 0x4c; cuInit starts it, cuDevicePrimaryCtxRetain opens a device
 * and cuCtxSetCurrent makes it the calling thread's.  Tests load it into
 * a rank the way CuPy or PyTorch load the real one, to record which device
 * a rank opened without a GPU. */
#include <stdio.h>

#define NOT_INITIALIZED 3
#define INVALID_VALUE 1
static const int buses[4] = {0x18, 0x2a, 0x3b, 0x4c};
static int started = 0;
static int active[4] = {0, 0, 0, 0};
static __thread long current = -1; /* a context is its device + 1 */

int cuInit(unsigned flags) { (void)flags; started = 1; return 0; }

int cuDeviceGetCount(int *count) {
    if (!started) return NOT_INITIALIZED;
    *count = 4;
    return 0;
}

int cuDeviceGet(int *dev, int ordinal) {
    if (!started) return NOT_INITIALIZED;
    if (ordinal < 0 || ordinal >= 4) return INVALID_VALUE;
    *dev = ordinal;
    return 0;
}

int cuDevicePrimaryCtxRetain(void **ctx, int dev) {
    if (!started) return NOT_INITIALIZED;
    if (dev < 0 || dev >= 4) return INVALID_VALUE;
    active[dev] = 1;
    *ctx = (void *)(long)(dev + 1);
    return 0;
}

int cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *is_active) {
    if (!started) return NOT_INITIALIZED;
    if (dev < 0 || dev >= 4) return INVALID_VALUE;
    *flags = 0;
    *is_active = active[dev];
    return 0;
}

int cuDeviceGetPCIBusId(char *buf, int len, int dev) {
    if (!started) return NOT_INITIALIZED;
    if (dev < 0 || dev >= 4) return INVALID_VALUE;
    snprintf(buf, (size_t)len, "0000:%02X:00.0", buses[dev]);
    return 0;
}

int cuCtxSetCurrent(void *ctx) { current = (long)ctx - 1; return 0; }

int cuCtxGetCurrent(void **ctx) {
    if (!started) return NOT_INITIALIZED;
    *ctx = current < 0 ? (void *)0 : (void *)(current + 1);
    return 0;
}

int cuCtxGetDevice(int *dev) {
    if (current < 0) return INVALID_VALUE;
    *dev = (int)current;
    return 0;
}
