/* sl_proc: figures about this process from /proc (see sl_proc.h). */
#include "sl_proc.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

double sl_proc_threads_cpu_s(const char *prefix)
{
    DIR *d = opendir("/proc/self/task");
    if (d == NULL)
        return 0;
    double total = 0;
    long hz = sysconf(_SC_CLK_TCK);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[64], comm[32] = "";
        size_t plen = strlen(prefix);
        snprintf(path, sizeof path, "/proc/self/task/%.20s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        int ok = fgets(comm, sizeof comm, f) != NULL;
        fclose(f);
        if (!ok || strncmp(comm, prefix, plen) != 0)
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%.20s/schedstat", e->d_name);
        unsigned long long ns = 0;
        if ((f = fopen(path, "r")) != NULL) {
            ok = fscanf(f, "%llu", &ns) == 1;
            fclose(f);
            if (ok) {
                total += (double)ns / 1e9;
                continue;
            }
        }
        snprintf(path, sizeof path, "/proc/self/task/%.20s/stat", e->d_name);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        char line[1024];
        ok = fgets(line, sizeof line, f) != NULL;
        fclose(f);
        const char *p = ok ? strrchr(line, ')') : NULL; /* comm may hold spaces */
        unsigned long long ut = 0, st = 0;
        if (p != NULL && hz > 0 &&
            sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
            total += (double)(ut + st) / (double)hz;
    }
    closedir(d);
    return total;
}
