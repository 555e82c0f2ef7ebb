// The cuDNN engine's layers: each layer kind's forward and backward on the device.
#include <algorithm>
#include <cmath>

#include "worker/trainer/cudnn_internal.h"

namespace psbench::trainer::cudnn_engine {

void CudnnNetwork::ForwardLayer(int index) {
  const Layer& layer = model_.layers[index];
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  const float one = 1.f, zero = 0.f;
  switch (layer.kind) {
    case LayerKind::kInput:
    case LayerKind::kSoftmaxCrossEntropy:
      return;
    case LayerKind::kConvolution: {
      RunConvolution(index, kConvForward, 0.f);
      if (layer.bias)
        PSB_CUDNN(cudnnAddTensor(cudnn_, &one, node.bias_desc, node.value[1], &one, out.desc, out.value));
      if (layer.relu) ReluForward(out);
      return;
    }
    case LayerKind::kBatchNorm: {
      Tensor& src = tensors_[layer.inputs[0]];
      if (own_batch_norm()) {
        PSB_CUDA(gpu_kernels::BnForward(BnShapeOf(index), src.value, out.value, node.value[0], node.value[1],
                                        layer.epsilon, layer.relu, node.save_mean, node.save_inv_var,
                                        node.bn_coeff, bn_partials_, stream_));
        return;
      }
      PSB_CUDNN(cudnnBatchNormalizationForwardTraining(
          cudnn_, CUDNN_BATCHNORM_SPATIAL, &one, &zero, src.desc, src.value, out.desc, out.value,
          node.bias_desc, node.value[0], node.value[1], 0.0, nullptr, nullptr,
          std::max<double>(layer.epsilon, CUDNN_BN_MIN_EPSILON), node.save_mean, node.save_inv_var));
      if (layer.relu) ReluForward(out);
      return;
    }
    case LayerKind::kRelu: {
      if (node.fused_into >= 0) return;  // the add before it wrote its output
      Tensor& src = tensors_[layer.inputs[0]];
      PSB_CUDNN(cudnnActivationForward(cudnn_, relu_, &one, src.desc, src.value, &zero, out.desc, out.value));
      return;
    }
    case LayerKind::kMaxPool:
    case LayerKind::kAvgPool: {
      Tensor& src = tensors_[layer.inputs[0]];
      PSB_CUDNN(cudnnPoolingForward(cudnn_, node.pool, &one, src.desc, src.value, &zero, out.desc, out.value));
      return;
    }
    case LayerKind::kLrn: {
      Tensor& src = tensors_[layer.inputs[0]];
      if (!nhwc_) {
        PSB_CUDNN(cudnnLRNCrossChannelForward(cudnn_, node.lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one,
                                              src.desc, src.value, &zero, out.desc, out.value));
        return;
      }
      PSB_CUDNN(cudnnTransformTensor(cudnn_, &one, src.desc, src.value, &zero, node.nchw, node.nchw_in));
      PSB_CUDNN(cudnnLRNCrossChannelForward(cudnn_, node.lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one,
                                            node.nchw, node.nchw_in, &zero, node.nchw, node.nchw_out));
      PSB_CUDNN(cudnnTransformTensor(cudnn_, &one, node.nchw, node.nchw_out, &zero, out.desc, out.value));
      return;
    }
    case LayerKind::kFullyConnected: {
      // Row-major out[N][O] = in[N][K] W[O][K]^T + b: in cuBLAS's column-major terms
      // out(OxN) = W^T(OxK) in(KxN), then out += b 1^T.
      Tensor& src = tensors_[layer.inputs[0]];
      const int k = static_cast<int>(model_.layers[layer.inputs[0]].out.elements());
      const int o = layer.outputs;
      const float* x = src.value;
      if (node.nchw_in) {
        PSB_CUDNN(cudnnTransformTensor(cudnn_, &one, src.desc, src.value, &zero, node.nchw, node.nchw_in));
        x = node.nchw_in;
      }
      PSB_CUBLAS(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, o, batch_, k, &one, node.value[0],
                             k, x, k, &zero, out.value, o));
      PSB_CUBLAS(cublasSger(cublas_, o, batch_, &one, node.value[1], 1, ones_, 1, out.value, o));
      if (layer.relu) ReluForward(out);
      return;
    }
    case LayerKind::kConcat: {
      for (size_t k = 0; k < layer.inputs.size(); ++k) {
        Tensor& t = tensors_[layer.inputs[k]];
        CopySlice(index, static_cast<int>(k), t.value, out.value + node.slice_offsets[k], true);
      }
      return;
    }
    case LayerKind::kAdd: {
      Tensor& a = tensors_[layer.inputs[0]];
      Tensor& b = tensors_[layer.inputs[1]];
      if (node.fused_relu >= 0) {
        PSB_CUDA(gpu_kernels::AddReluForward(a.value, b.value, tensors_[node.fused_relu].value, out.count, stream_));
        return;
      }
      PSB_CUDNN(cudnnOpTensor(cudnn_, add_, &one, a.desc, a.value, &one, b.desc, b.value, &zero, out.desc, out.value));
      return;
    }
  }
}

// NCHW: each image's channels of one input are one contiguous run of the concatenation, so
// a 2-D copy moves them (cuDNN's strided transform took 25 ms of Inception-v3's step on an
// H100); NHWC: the transform, each pixel's channels being a short strided run.
void CudnnNetwork::CopySlice(int index, int k, const float* from, float* to, bool into_concat) {
  const Node& node = nodes_[index];
  const Tensor& t = tensors_[model_.layers[index].inputs[k]];
  const float one = 1.f, zero = 0.f;
  if (nhwc_) {
    PSB_CUDNN(into_concat ? cudnnTransformTensor(cudnn_, &one, t.desc, from, &zero, node.slices[k], to)
                          : cudnnTransformTensor(cudnn_, &one, node.slices[k], from, &zero, t.desc, to));
    return;
  }
  const size_t run = model_.layers[model_.layers[index].inputs[k]].out.elements() * sizeof(float);
  const size_t pitch = model_.layers[index].out.elements() * sizeof(float);
  PSB_CUDA(cudaMemcpy2DAsync(to, into_concat ? pitch : run, from, into_concat ? run : pitch, run, batch_,
                             cudaMemcpyDeviceToDevice, stream_));
}

void CudnnNetwork::BackwardLayer(int index) {
  const Layer& layer = model_.layers[index];
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  const float one = 1.f, zero = 0.f;
  const int in0 = layer.inputs.empty() ? 0 : layer.inputs[0];
  Tensor& src = tensors_[in0];
  const bool data = in0 != 0;  // the images need no gradient
  auto params_ready = [&] {
    for (int p : node.params) StageGradient(p);
  };
  switch (layer.kind) {
    case LayerKind::kInput:
    case LayerKind::kSoftmaxCrossEntropy:
      return;
    case LayerKind::kConvolution: {
      float* dy = layer.relu ? ReluBackward(index) : out.diff;
      if (layer.bias)
        PSB_CUDNN(cudnnConvolutionBackwardBias(cudnn_, &one, out.desc, dy, &zero, node.bias_desc, node.grad[1]));
      RunConvolution(index, kConvBackwardFilter, 0.f);
      // The PS gets KCRS, whatever the layout the device computed in.
      if (node.filter_grad)
        PSB_CUDNN(cudnnTransformTensor(cudnn_, &one, node.krsc, node.filter_grad, &zero, node.kcrs, node.grad[0]));
      params_ready();
      if (data) {
        RunConvolution(index, kConvBackwardData, Beta(in0));
        Written(in0);
      }
      return;
    }
    case LayerKind::kBatchNorm: {
      const float beta = Beta(in0);
      if (own_batch_norm()) {
        PSB_CUDA(gpu_kernels::BnBackward(BnShapeOf(index), src.value, out.value, out.diff, src.diff, beta,
                                         node.value[0], node.save_mean, node.save_inv_var, layer.relu,
                                         node.grad[0], node.grad[1], node.bn_coeff, bn_partials_, stream_));
        Written(in0);
        params_ready();
        return;
      }
      float* dy = layer.relu ? ReluBackward(index) : out.diff;
      PSB_CUDNN(cudnnBatchNormalizationBackward(
          cudnn_, CUDNN_BATCHNORM_SPATIAL, &one, &beta, &one, &zero, src.desc, src.value, out.desc,
          dy, src.desc, src.diff, node.bias_desc, node.value[0], node.grad[0], node.grad[1],
          std::max<double>(layer.epsilon, CUDNN_BN_MIN_EPSILON), node.save_mean, node.save_inv_var));
      Written(in0);
      params_ready();
      return;
    }
    case LayerKind::kRelu: {
      if (!data || node.fused_into >= 0) return;  // fused: the add's backward passes the gradient on
      const float beta = Beta(in0);
      PSB_CUDNN(cudnnActivationBackward(cudnn_, relu_, &one, out.desc, out.value, out.desc, out.diff,
                                        src.desc, src.value, &beta, src.desc, src.diff));
      Written(in0);
      return;
    }
    case LayerKind::kMaxPool:
    case LayerKind::kAvgPool: {
      if (!data) return;
      const float beta = Beta(in0);
      PSB_CUDNN(cudnnPoolingBackward(cudnn_, node.pool, &one, out.desc, out.value, out.desc, out.diff,
                                     src.desc, src.value, &beta, src.desc, src.diff));
      Written(in0);
      return;
    }
    case LayerKind::kLrn: {
      if (!data) return;
      const float beta = Beta(in0);
      if (!nhwc_) {
        PSB_CUDNN(cudnnLRNCrossChannelBackward(cudnn_, node.lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one,
                                               out.desc, out.value, out.desc, out.diff, src.desc,
                                               src.value, &beta, src.desc, src.diff));
      } else {
        PSB_CUDNN(cudnnTransformTensor(cudnn_, &one, out.desc, out.diff, &zero, node.nchw, node.nchw_out_diff));
        PSB_CUDNN(cudnnLRNCrossChannelBackward(cudnn_, node.lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one,
                                               node.nchw, node.nchw_out, node.nchw, node.nchw_out_diff,
                                               node.nchw, node.nchw_in, &zero, node.nchw, node.nchw_in_diff));
        PSB_CUDNN(cudnnTransformTensor(cudnn_, &one, node.nchw, node.nchw_in_diff, &beta, src.desc, src.diff));
      }
      Written(in0);
      return;
    }
    case LayerKind::kFullyConnected: {
      float* dy = layer.relu ? ReluBackward(index) : out.diff;
      const int k = static_cast<int>(model_.layers[in0].out.elements());
      const int o = layer.outputs;
      const float* x = node.nchw_in ? node.nchw_in : src.value;  // as forward read it
      // dW(row-major OxK) = dy^T in: column-major dW(KxO) = in(KxN) dy(OxN)^T.
      PSB_CUBLAS(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_T, k, o, batch_, &one, x, k,
                             dy, o, &zero, node.grad[0], k));
      // db = dy summed over the batch.
      PSB_CUBLAS(cublasSgemv(cublas_, CUBLAS_OP_N, o, batch_, &one, dy, o, ones_, 1, &zero, node.grad[1], 1));
      params_ready();
      if (data) {
        // din(KxN) = W(KxO, column-major view of row-major OxK) dy(OxN).
        const float beta = Beta(in0);
        if (!node.nchw_in) {
          PSB_CUBLAS(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, k, batch_, o, &one, node.value[0],
                                 k, dy, o, &beta, src.diff, k));
        } else {
          PSB_CUBLAS(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, k, batch_, o, &one, node.value[0],
                                 k, dy, o, &zero, node.nchw_in_diff, k));
          PSB_CUDNN(cudnnTransformTensor(cudnn_, &one, node.nchw, node.nchw_in_diff, &beta, src.desc, src.diff));
        }
        Written(in0);
      }
      return;
    }
    case LayerKind::kConcat: {
      for (size_t k = 0; k < layer.inputs.size(); ++k) {
        const int in = layer.inputs[k];
        if (in == 0) continue;
        Tensor& t = tensors_[in];
        float* slice = out.diff + node.slice_offsets[k];
        if (t.diff_written) {
          PSB_CUDNN(cudnnTransformTensor(cudnn_, &one, node.slices[k], slice, &one, t.desc, t.diff));
        } else {
          CopySlice(index, static_cast<int>(k), slice, t.diff, false);
        }
        Written(in);
      }
      return;
    }
    case LayerKind::kAdd: {
      if (node.fused_relu >= 0) {
        const Tensor& relu = tensors_[node.fused_relu];
        float* diff[2] = {nullptr, nullptr};
        float beta[2] = {0.f, 0.f};
        for (int k = 0; k < 2; ++k) {
          const int in = layer.inputs[k];
          if (in == 0) continue;
          diff[k] = tensors_[in].diff;
          beta[k] = Beta(in);
        }
        PSB_CUDA(gpu_kernels::AddReluBackward(relu.value, relu.diff, diff[0], beta[0], diff[1], beta[1],
                                              out.count, stream_));
        for (int in : layer.inputs)
          if (in != 0) Written(in);
        return;
      }
      for (int in : layer.inputs) {
        if (in == 0) continue;
        Tensor& t = tensors_[in];
        if (!t.diff_written) {
          PSB_CUDA(cudaMemcpyAsync(t.diff, out.diff, out.count * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
        } else {
          PSB_CUBLAS(cublasSaxpy(cublas_, static_cast<int>(out.count), &one, out.diff, 1, t.diff, 1));
        }
        Written(in);
      }
      return;
    }
  }
}

}  // namespace psbench::trainer::cudnn_engine
