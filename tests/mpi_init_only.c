/* MPI_Init and MPI_Finalize, nothing else: the libraries the MPI library maps on its own (a CUDA-aware
 * Open MPI or UCX may load the CUDA driver or runtime at MPI_Init), which tests/cuda_libs_lazy.sh does not
 * count against zinc. */
#include <mpi.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Finalize();
    return 0;
}
