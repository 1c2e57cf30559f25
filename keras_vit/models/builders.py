"""Every builder by name: each family's general builder and one per named size.

The one module that names the family folders: importing a folder's `named`
module imports the folder first, which registers the family
(`keras_vit.models.registration`). `keras_vit.models` and `keras_vit` give
these names as they are, so IDEs and type checkers read them from the source
(`__all__` grows by each folder's, a form they follow).
"""

# `import <folder>.named as ...`, not `from <folder> import named`: a folder's `__all__` does not
# list `named`, and a type checker would then not follow the `__all__ +=` lines below.
import keras_vit.models.vit.named as vit_named
from keras_vit.models.vit.named import *  # noqa: F401,F403
import keras_vit.models.convit.named as convit_named
from keras_vit.models.convit.named import *  # noqa: F401,F403
import keras_vit.models.swin.named as swin_named
from keras_vit.models.swin.named import *  # noqa: F401,F403
import keras_vit.models.axial.named as axial_named
from keras_vit.models.axial.named import *  # noqa: F401,F403
import keras_vit.models.dinov2.named as dinov2_named
from keras_vit.models.dinov2.named import *  # noqa: F401,F403

__all__ = []
__all__ += vit_named.__all__
__all__ += convit_named.__all__
__all__ += swin_named.__all__
__all__ += axial_named.__all__
__all__ += dinov2_named.__all__
