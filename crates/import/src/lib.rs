//! sediment-import (being written)
