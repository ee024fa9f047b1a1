"""``prefetch(a, i)``: a hint to the CPU to bring element ``i`` of the 1-D array ``a`` into
its caches for writing (LLVM's ``llvm.prefetch``; x86 ``prefetchw``). Only a hint: no
fault, no effect on results, and an index past the end is harmless (no bounds check is made:
the address is computed, never read)."""

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
        base = builder.ptrtoint(ary.data, cgutils.intp_t)
        addr = builder.inttoptr(builder.add(base, builder.mul(i, size)), ir.PointerType())
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [ir.PointerType(), i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        # write, high temporal locality, data cache
        builder.call(fn, [addr, ir.Constant(i32, 1), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen
