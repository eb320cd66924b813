// ringd_allreduce_op.cc - a TensorFlow custom op calling libringd directly, built only by
// tools/experiments/tf-bridge.py to measure the bridge ringd.tensorflow does not use
// (Horovod's way: compiled against the installed TensorFlow's headers and ABI). It
// averages a float32 tensor over the ring whose ring_comm_t * the attribute carries
// (ringd's Comm._address()); synchronous, on TensorFlow's thread.
#include <ringd/comm.h>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

using namespace tensorflow;

REGISTER_OP("RingdAllreduceProto")
    .Input("x: float")
    .Output("y: float")
    .Attr("comm: int")
    .SetIsStateful()
    .SetShapeFn([](shape_inference::InferenceContext *c) {
        c->set_output(0, c->input(0));
        return OkStatus();
    });

class RingdAllreduceProto : public OpKernel {
  public:
    explicit RingdAllreduceProto(OpKernelConstruction *ctx) : OpKernel(ctx)
    {
        int64_t address;
        OP_REQUIRES_OK(ctx, ctx->GetAttr("comm", &address));
        comm_ = reinterpret_cast<ring_comm_t *>(address);
    }

    void Compute(OpKernelContext *ctx) override
    {
        const Tensor &x = ctx->input(0);
        Tensor *y = nullptr;
        OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &y));
        ring_status_t st = ring_allreduce(comm_, x.flat<float>().data(), y->flat<float>().data(),
                                          (size_t)x.NumElements(), RING_FLOAT32, RING_AVG);
        OP_REQUIRES(ctx, st == RING_OK, errors::Internal("ringd: ", ring_last_error()));
    }

  private:
    ring_comm_t *comm_;
};

REGISTER_KERNEL_BUILDER(Name("RingdAllreduceProto").Device(DEVICE_CPU), RingdAllreduceProto);
