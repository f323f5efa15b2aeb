/* Runs a libFuzzer target's LLVMFuzzerTestOneInput over each file named on
 * the command line, or each file of a directory named there: the committed
 * seeds as a ctest without clang's fuzzer runtime. Exit 1 when a file
 * cannot be read; a target that finds a fault aborts. With SLUICE_FUZZ_TRACE
 * set each file is named on stderr before it runs. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    size_t k;
    while (buf != NULL && (k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (buf == NULL)
        return 1;
    if (getenv("SLUICE_FUZZ_TRACE") != NULL)
        fprintf(stderr, "%s\n", path);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int bad = 0, runs = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *e;
            while (d != NULL && (e = readdir(d)) != NULL) {
                if (e->d_name[0] == '.')
                    continue;
                char p[4096];
                snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
                bad |= run_file(p);
                runs++;
            }
            if (d != NULL)
                closedir(d);
        } else {
            bad |= run_file(argv[i]);
            runs++;
        }
    }
    printf("%d inputs\n", runs);
    return bad || runs == 0;
}
