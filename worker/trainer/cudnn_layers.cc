// The cuDNN engine's layers: each layer kind's forward and backward on the device.
#include <algorithm>
#include <cmath>

#include "worker/trainer/cudnn_internal.h"
#include "worker/trainer/loss.h"

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
      Tensor& src = tensors_[layer.inputs[0]];
      PSB_CUDNN(cudnnConvolutionForward(cudnn_, &one, src.desc, src.value, node.filter,
                                        node.value[0], node.conv, node.fwd_algo, workspace_,
                                        workspace_bytes_, &zero, out.desc, out.value));
      if (layer.bias)
        PSB_CUDNN(cudnnAddTensor(cudnn_, &one, node.bias_desc, node.value[1], &one, out.desc, out.value));
      if (layer.relu) ReluForward(out);
      return;
    }
    case LayerKind::kBatchNorm: {
      Tensor& src = tensors_[layer.inputs[0]];
      PSB_CUDNN(cudnnBatchNormalizationForwardTraining(
          cudnn_, CUDNN_BATCHNORM_SPATIAL, &one, &zero, src.desc, src.value, out.desc, out.value,
          node.bias_desc, node.value[0], node.value[1], 0.0, nullptr, nullptr,
          std::max<double>(layer.epsilon, CUDNN_BN_MIN_EPSILON), node.save_mean, node.save_inv_var));
      if (layer.relu) ReluForward(out);
      return;
    }
    case LayerKind::kRelu: {
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
      PSB_CUDNN(cudnnLRNCrossChannelForward(cudnn_, node.lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one,
                                            src.desc, src.value, &zero, out.desc, out.value));
      return;
    }
    case LayerKind::kFullyConnected: {
      // Row-major out[N][O] = in[N][K] W[O][K]^T + b: in cuBLAS's column-major terms
      // out(OxN) = W^T(OxK) in(KxN), then out += b 1^T.
      Tensor& src = tensors_[layer.inputs[0]];
      const int k = static_cast<int>(model_.layers[layer.inputs[0]].out.elements());
      const int o = layer.outputs;
      PSB_CUBLAS(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, o, batch_, k, &one, node.value[0],
                             k, src.value, k, &zero, out.value, o));
      PSB_CUBLAS(cublasSger(cublas_, o, batch_, &one, node.value[1], 1, ones_, 1, out.value, o));
      if (layer.relu) ReluForward(out);
      return;
    }
    case LayerKind::kConcat: {
      // NCHW: each image's slice of channels is one contiguous run.
      const size_t out_image = layer.out.elements();
      size_t offset = 0;
      for (int in : layer.inputs) {
        const size_t in_image = model_.layers[in].out.elements();
        PSB_CUDA(cudaMemcpy2DAsync(out.value + offset, out_image * sizeof(float), tensors_[in].value,
                                   in_image * sizeof(float), in_image * sizeof(float), batch_,
                                   cudaMemcpyDeviceToDevice, stream_));
        offset += in_image;
      }
      return;
    }
    case LayerKind::kAdd: {
      Tensor& a = tensors_[layer.inputs[0]];
      Tensor& b = tensors_[layer.inputs[1]];
      PSB_CUDA(cudaMemcpyAsync(out.value, a.value, out.count * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
      PSB_CUBLAS(cublasSaxpy(cublas_, static_cast<int>(out.count), &one, b.value, 1, out.value, 1));
      return;
    }
  }
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
      PSB_CUDNN(cudnnConvolutionBackwardFilter(cudnn_, &one, src.desc, src.value, out.desc, dy,
                                               node.conv, node.bwd_filter_algo, workspace_,
                                               workspace_bytes_, &zero, node.filter, node.grad[0]));
      params_ready();
      if (data) {
        const float beta = Beta(in0);
        PSB_CUDNN(cudnnConvolutionBackwardData(cudnn_, &one, node.filter, node.value[0], out.desc, dy,
                                               node.conv, node.bwd_data_algo, workspace_,
                                               workspace_bytes_, &beta, src.desc, src.diff));
        Written(in0);
      }
      return;
    }
    case LayerKind::kBatchNorm: {
      float* dy = layer.relu ? ReluBackward(index) : out.diff;
      const float beta = Beta(in0);
      PSB_CUDNN(cudnnBatchNormalizationBackward(
          cudnn_, CUDNN_BATCHNORM_SPATIAL, &one, &beta, &one, &zero, src.desc, src.value, out.desc,
          dy, src.desc, src.diff, node.bias_desc, node.value[0], node.grad[0], node.grad[1],
          std::max<double>(layer.epsilon, CUDNN_BN_MIN_EPSILON), node.save_mean, node.save_inv_var));
      Written(in0);
      params_ready();
      return;
    }
    case LayerKind::kRelu: {
      if (!data) return;
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
      PSB_CUDNN(cudnnLRNCrossChannelBackward(cudnn_, node.lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one,
                                             out.desc, out.value, out.desc, out.diff, src.desc,
                                             src.value, &beta, src.desc, src.diff));
      Written(in0);
      return;
    }
    case LayerKind::kFullyConnected: {
      float* dy = layer.relu ? ReluBackward(index) : out.diff;
      const int k = static_cast<int>(model_.layers[in0].out.elements());
      const int o = layer.outputs;
      // dW(row-major OxK) = dy^T in: column-major dW(KxO) = in(KxN) dy(OxN)^T.
      PSB_CUBLAS(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_T, k, o, batch_, &one, src.value, k,
                             dy, o, &zero, node.grad[0], k));
      // db = dy summed over the batch.
      PSB_CUBLAS(cublasSgemv(cublas_, CUBLAS_OP_N, o, batch_, &one, dy, o, ones_, 1, &zero, node.grad[1], 1));
      params_ready();
      if (data) {
        // din(KxN) = W(KxO, column-major view of row-major OxK) dy(OxN).
        const float beta = Beta(in0);
        PSB_CUBLAS(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, k, batch_, o, &one, node.value[0],
                               k, dy, o, &beta, src.diff, k));
        Written(in0);
      }
      return;
    }
    case LayerKind::kConcat: {
      const size_t out_image = layer.out.elements();
      size_t offset = 0;
      for (int in : layer.inputs) {
        const size_t in_image = model_.layers[in].out.elements();
        Tensor& t = tensors_[in];
        if (in != 0) {
          if (!t.diff_written) {
            PSB_CUDA(cudaMemcpy2DAsync(t.diff, in_image * sizeof(float), out.diff + offset,
                                       out_image * sizeof(float), in_image * sizeof(float), batch_,
                                       cudaMemcpyDeviceToDevice, stream_));
          } else {
            // Accumulate image by image (the slices are strided in the concatenation).
            for (int n = 0; n < batch_; ++n) {
              PSB_CUBLAS(cublasSaxpy(cublas_, static_cast<int>(in_image), &one,
                                     out.diff + n * out_image + offset, 1, t.diff + n * in_image, 1));
            }
          }
          Written(in);
        }
        offset += in_image;
      }
      return;
    }
    case LayerKind::kAdd: {
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
