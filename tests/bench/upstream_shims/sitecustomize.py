# numpy >= 1.24 removed np.float, which upstream's indexed_dataset.py references at import.
import numpy

numpy.float = float
