"""``prefetch(a, i)``: a hint to the CPU to bring element ``i`` of the 1-D array ``a`` into
its caches for writing (LLVM's ``llvm.prefetch``: x86 ``prefetchw``). Only a hint: it
changes no result, and an index past the end is harmless (the address is computed, not
read; a prefetch never faults), so no bounds check is made.

It keeps a stream of writes going across 4 KiB pages, where the hardware prefetcher stops
(``kernels.cd``'s sweep over the row state)."""

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def prefetch(typingctx, arr, idx):
    if not (isinstance(arr, types.Array) and arr.ndim == 1 and isinstance(idx, types.Integer)):
        return None
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aryty, idxty = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        i = context.cast(builder, args[1], idxty, types.intp)
        size = context.get_constant(types.intp, context.get_abi_sizeof(
            context.get_data_type(aryty.dtype)))
        addr = builder.add(builder.ptrtoint(ary.data, cgutils.intp_t), builder.mul(i, size))
        if getattr(ary.data.type, "is_opaque", False):  # LLVM's opaque pointers
            ptr_t, name = ary.data.type, "llvm.prefetch.p0"
        else:  # typed pointers (older llvmlite)
            ptr_t, name = ir.IntType(8).as_pointer(), "llvm.prefetch.p0i8"
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [ptr_t, i32, i32, i32]), name)
        # write, high temporal locality, data cache
        builder.call(fn, [builder.inttoptr(addr, ptr_t), ir.Constant(i32, 1),
                          ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen
