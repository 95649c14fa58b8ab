/* main.c - the `kfuse` executable: verify, benchmark and inspect the kfuse
 * kernels on this machine. Everything lives in the tool library (cli.c and
 * friends) so that tests/test_tools.c can check it; run `kfuse --help`. */
#include "cli.h"

int main(int argc, char **argv)
{
    return kfc_main(argc, argv);
}
