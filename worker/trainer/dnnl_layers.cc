// The oneDNN engine's layers: for each layer kind, its forward and backward primitives, built
// once (see dnnl_network.cc for the layouts they keep).
#include <algorithm>
#include <utility>

#include "worker/trainer/dnnl_internal.h"

namespace psbench::trainer::dnnl_engine {

void DnnlNetwork::BuildConvolution(int index) {
  const Layer& layer = model_.layers[index];
  const int in = layer.inputs[0];
  Tensor& src = tensors_[in];
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  const Shape& s = model_.layers[in].out;
  memory::dims wdims = {layer.outputs, s.c, layer.kernel_h, layer.kernel_w};
  memory::dims strides = {layer.stride_h, layer.stride_w};
  memory::dims pad_l = {layer.pad_top, layer.pad_left}, pad_r = {layer.pad_bottom, layer.pad_right};
  memory::desc w_any(wdims, dt::f32, tag::any);
  memory::desc b_md = layer.bias ? memory::desc({layer.outputs}, dt::f32, tag::x) : memory::desc();
  memory::desc dst_any(Dims(batch_, layer.out, false), dt::f32, tag::any);

  const dnnl::primitive_attr attr = FusedReluAttr(layer.relu);
  dnnl::convolution_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src.md, w_any, b_md,
       dst_any, strides, pad_l, pad_r},
      attr, engine_);
  out.md = fwd.dst_desc();
  out.value = memory(out.md, engine_);
  AddParam(index, layer.params[0], fwd.weights_desc());
  if (layer.bias) AddParam(index, layer.params[1], b_md);

  Step step{dnnl::convolution_forward(fwd), {{DNNL_ARG_SRC, src.value}, {DNNL_ARG_DST, out.value}}};
  node.forward.push_back(std::move(step));

  out.diff = memory(out.md, engine_);  // needed now by the ReLU backward
  memory diff_dst = layer.relu ? FusedReluBackward(index) : out.diff;
  dnnl::convolution_backward_weights::primitive_desc bww(
      {dnnl::algorithm::convolution_direct, src.md, fwd.weights_desc(), b_md, out.md, strides,
       pad_l, pad_r},
      engine_, fwd);
  node.backward_weights.push_back(
      {dnnl::convolution_backward_weights(bww), {{DNNL_ARG_SRC, src.value}, {DNNL_ARG_DIFF_DST, diff_dst}}});
  if (in != 0) {
    // Backward data wants the weights transposed (OIhw16o16i where forward has
    // OIhw16i16o): forcing the forward layout on it would select the reference kernel, so
    // the weights are reordered for it every step, as PyTorch does.
    dnnl::convolution_backward_data::primitive_desc bwd(
        {dnnl::algorithm::convolution_direct, src.md, w_any, out.md, strides, pad_l, pad_r},
        engine_, fwd);
    Step back{dnnl::convolution_backward_data(bwd), {{DNNL_ARG_DIFF_DST, diff_dst}}};
    if (bwd.weights_desc() != fwd.weights_desc()) {
      node.backward_weights_for_data = memory(bwd.weights_desc(), engine_);
      back.args[DNNL_ARG_WEIGHTS] = node.backward_weights_for_data;
      node.weights_reorder = dnnl::reorder::primitive_desc(engine_, fwd.weights_desc(), engine_,
                                                           bwd.weights_desc());
    }
    node.backward_data.push_back(std::move(back));
  }
}

void DnnlNetwork::BuildBatchNorm(int index) {
  const Layer& layer = model_.layers[index];
  const int in = layer.inputs[0];
  Tensor& src = tensors_[in];
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  if (layer.relu) flags = flags | dnnl::normalization_flags::fuse_norm_relu;
  dnnl::batch_normalization_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training, src.md, layer.epsilon, flags}, engine_);
  out.md = fwd.dst_desc();
  out.value = memory(out.md, engine_);
  memory::desc c_md({layer.out.c}, dt::f32, tag::x);
  AddParam(index, layer.params[0], c_md);
  AddParam(index, layer.params[1], c_md);
  node.mean = memory(fwd.mean_desc(), engine_);
  node.variance = memory(fwd.variance_desc(), engine_);
  Step step{dnnl::batch_normalization_forward(fwd),
            {{DNNL_ARG_SRC, src.value},
             {DNNL_ARG_DST, out.value},
             {DNNL_ARG_MEAN, node.mean},
             {DNNL_ARG_VARIANCE, node.variance}}};
  if (layer.relu) {
    node.workspace = memory(fwd.workspace_desc(), engine_);
    step.args[DNNL_ARG_WORKSPACE] = node.workspace;
  }
  node.forward.push_back(std::move(step));

  out.diff = memory(out.md, engine_);
  dnnl::batch_normalization_backward::primitive_desc bwd(
      {dnnl::prop_kind::backward, out.md, src.md, layer.epsilon, flags}, engine_, fwd);
  Step back{dnnl::batch_normalization_backward(bwd),
            {{DNNL_ARG_SRC, src.value},
             {DNNL_ARG_MEAN, node.mean},
             {DNNL_ARG_VARIANCE, node.variance},
             {DNNL_ARG_DIFF_DST, out.diff}}};
  if (layer.relu) back.args[DNNL_ARG_WORKSPACE] = node.workspace;
  // Batch norm on the images: nobody wants their gradient, but the primitive must still run
  // for the scale and shift gradients; it writes the input gradient here, unread.
  if (in == 0) back.args[DNNL_ARG_DIFF_SRC] = memory(src.md, engine_);
  // One primitive yields both the parameter and the input gradients: it is the layer's
  // backward_data step, and its parameter gradients are final after it.
  node.backward_data.push_back(std::move(back));
}

void DnnlNetwork::BuildRelu(int index) {
  const int in = model_.layers[index].inputs[0];
  Tensor& src = tensors_[in];
  Tensor& out = tensors_[index];
  dnnl::eltwise_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training, dnnl::algorithm::eltwise_relu_use_dst_for_bwd, src.md,
       0.f, 0.f},
      engine_);
  out.md = fwd.dst_desc();
  out.value = memory(out.md, engine_);
  nodes_[index].forward.push_back(
      {dnnl::eltwise_forward(fwd), {{DNNL_ARG_SRC, src.value}, {DNNL_ARG_DST, out.value}}});
  out.diff = memory(out.md, engine_);
  if (fault_ == EngineFault::kReluWithoutMask) {  // the gradient copied back, unmasked
    dnnl::reorder::primitive_desc pd(engine_, out.md, engine_, src.md);
    nodes_[index].backward_data.push_back(
        {dnnl::reorder(pd), {{DNNL_ARG_FROM, out.diff}}, DNNL_ARG_TO, 0});
    return;
  }
  dnnl::eltwise_backward::primitive_desc bwd(
      {dnnl::algorithm::eltwise_relu_use_dst_for_bwd, src.md, out.md, 0.f, 0.f}, engine_, fwd);
  nodes_[index].backward_data.push_back(
      {dnnl::eltwise_backward(bwd), {{DNNL_ARG_DST, out.value}, {DNNL_ARG_DIFF_DST, out.diff}}});
}

void DnnlNetwork::BuildPool(int index) {
  const Layer& layer = model_.layers[index];
  const int in = layer.inputs[0];
  Tensor& src = tensors_[in];
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  const bool max = layer.kind == LayerKind::kMaxPool;
  auto algo = max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding;
  memory::dims strides = {layer.stride_h, layer.stride_w};
  memory::dims kernel = {layer.kernel_h, layer.kernel_w};
  memory::dims pad_l = {layer.pad_top, layer.pad_left}, pad_r = {layer.pad_bottom, layer.pad_right};
  memory::desc dst_any(Dims(batch_, layer.out, false), dt::f32, tag::any);
  dnnl::pooling_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training, algo, src.md, dst_any, strides, kernel, pad_l, pad_r},
      engine_);
  out.md = fwd.dst_desc();
  out.value = memory(out.md, engine_);
  Step step{dnnl::pooling_forward(fwd), {{DNNL_ARG_SRC, src.value}, {DNNL_ARG_DST, out.value}}};
  if (max) {
    node.workspace = memory(fwd.workspace_desc(), engine_);
    step.args[DNNL_ARG_WORKSPACE] = node.workspace;
  }
  node.forward.push_back(std::move(step));
  out.diff = memory(out.md, engine_);
  if (max && fault_ == EngineFault::kMaxPoolAsAverage) {  // every window's gradient spread evenly
    const auto avg = dnnl::algorithm::pooling_avg_include_padding;
    dnnl::pooling_forward::primitive_desc hint(
        {dnnl::prop_kind::forward_training, avg, src.md, out.md, strides, kernel, pad_l, pad_r},
        engine_);
    dnnl::pooling_backward::primitive_desc wrong(
        {avg, src.md, out.md, strides, kernel, pad_l, pad_r}, engine_, hint);
    node.backward_data.push_back({dnnl::pooling_backward(wrong), {{DNNL_ARG_DIFF_DST, out.diff}}});
    return;
  }
  dnnl::pooling_backward::primitive_desc bwd(
      {algo, src.md, out.md, strides, kernel, pad_l, pad_r}, engine_, fwd);
  Step back{dnnl::pooling_backward(bwd), {{DNNL_ARG_DIFF_DST, out.diff}}};
  if (max) back.args[DNNL_ARG_WORKSPACE] = node.workspace;
  node.backward_data.push_back(std::move(back));
}

void DnnlNetwork::BuildLrn(int index) {
  const Layer& layer = model_.layers[index];
  const int in = layer.inputs[0];
  Tensor& src = tensors_[in];
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  auto algo = dnnl::algorithm::lrn_across_channels;
  dnnl::lrn_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training, algo, src.md, layer.lrn_size, layer.lrn_alpha,
       layer.lrn_beta, layer.lrn_k},
      engine_);
  out.md = fwd.dst_desc();
  out.value = memory(out.md, engine_);
  node.workspace = memory(fwd.workspace_desc(), engine_);
  node.forward.push_back({dnnl::lrn_forward(fwd),
                          {{DNNL_ARG_SRC, src.value},
                           {DNNL_ARG_DST, out.value},
                           {DNNL_ARG_WORKSPACE, node.workspace}}});
  out.diff = memory(out.md, engine_);
  dnnl::lrn_backward::primitive_desc bwd(
      {algo, src.md, out.md, layer.lrn_size, layer.lrn_alpha, layer.lrn_beta, layer.lrn_k},
      engine_, fwd);
  node.backward_data.push_back({dnnl::lrn_backward(bwd),
                                {{DNNL_ARG_SRC, src.value},
                                 {DNNL_ARG_DIFF_DST, out.diff},
                                 {DNNL_ARG_WORKSPACE, node.workspace}}});
}

void DnnlNetwork::BuildFullyConnected(int index) {
  const Layer& layer = model_.layers[index];
  const int in = layer.inputs[0];
  Tensor& src = tensors_[in];
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  const Shape& s = model_.layers[in].out;
  const bool flat_input = src.md.dims().size() == 2;
  memory::dims wdims = flat_input ? memory::dims{layer.outputs, s.c}
                                  : memory::dims{layer.outputs, s.c, s.h, s.w};
  memory::desc w_any(wdims, dt::f32, tag::any);
  memory::desc b_md({layer.outputs}, dt::f32, tag::x);
  memory::desc dst_md({batch_, layer.outputs}, dt::f32, tag::nc);
  const dnnl::primitive_attr attr = FusedReluAttr(layer.relu);
  dnnl::inner_product_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training, src.md, w_any, b_md, dst_md}, attr, engine_);
  out.md = fwd.dst_desc();
  out.value = memory(out.md, engine_);
  AddParam(index, layer.params[0], fwd.weights_desc());
  AddParam(index, layer.params[1], b_md);
  node.forward.push_back(
      {dnnl::inner_product_forward(fwd), {{DNNL_ARG_SRC, src.value}, {DNNL_ARG_DST, out.value}}});
  out.diff = memory(out.md, engine_);
  memory diff_dst = layer.relu ? FusedReluBackward(index) : out.diff;
  dnnl::inner_product_backward_weights::primitive_desc bww(
      {src.md, fwd.weights_desc(), b_md, out.md}, engine_, fwd);
  node.backward_weights.push_back({dnnl::inner_product_backward_weights(bww),
                                   {{DNNL_ARG_SRC, src.value}, {DNNL_ARG_DIFF_DST, diff_dst}}});
  if (in != 0) {
    dnnl::inner_product_backward_data::primitive_desc bwd({src.md, fwd.weights_desc(), out.md},
                                                          engine_, fwd);
    node.backward_data.push_back(
        {dnnl::inner_product_backward_data(bwd), {{DNNL_ARG_DIFF_DST, diff_dst}}});
  }
}

void DnnlNetwork::BuildConcat(int index) {
  const Layer& layer = model_.layers[index];
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  std::vector<memory::desc> srcs;
  for (int in : layer.inputs) srcs.push_back(tensors_[in].md);
  dnnl::concat::primitive_desc fwd(1, srcs, engine_);
  out.md = fwd.dst_desc();
  out.value = memory(out.md, engine_);
  Step step{dnnl::concat(fwd), {{DNNL_ARG_DST, out.value}}};
  for (size_t i = 0; i < layer.inputs.size(); ++i)
    step.args[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i)] = tensors_[layer.inputs[i]].value;
  node.forward.push_back(std::move(step));
  // Backward: each input's gradient is its slice of the output gradient.
  out.diff = memory(out.md, engine_);
  memory::dim offset = 0;
  for (size_t i = 0; i < layer.inputs.size(); ++i) {
    const memory::desc& in_md = tensors_[layer.inputs[i]].md;
    memory::dims sub_dims = in_md.dims();
    // (The test fault reads the first input's gradient from the slice after its own, where it
    // fits: a slice on a block boundary, as a blocked layout needs.)
    const bool misplaced = fault_ == EngineFault::kConcatSliceMisplaced && i == 0 &&
                           2 * sub_dims[1] <= out.md.dims()[1];
    memory::desc slice =
        out.md.submemory_desc(sub_dims, {0, misplaced ? sub_dims[1] : offset, 0, 0});
    memory slice_mem(slice, engine_, out.diff.get_data_handle());
    dnnl::reorder::primitive_desc pd(engine_, slice, engine_, in_md);
    node.backward_data.push_back(
        {dnnl::reorder(pd), {{DNNL_ARG_FROM, slice_mem}}, DNNL_ARG_TO, static_cast<int>(i)});
    offset += sub_dims[1];
  }
}

void DnnlNetwork::BuildAdd(int index) {
  const Layer& layer = model_.layers[index];
  Tensor& a = tensors_[layer.inputs[0]];
  Tensor& b = tensors_[layer.inputs[1]];
  Tensor& out = tensors_[index];
  Node& node = nodes_[index];
  dnnl::binary::primitive_desc fwd({dnnl::algorithm::binary_add, a.md, b.md, a.md}, engine_);
  out.md = fwd.dst_desc();
  out.value = memory(out.md, engine_);
  node.forward.push_back({dnnl::binary(fwd),
                          {{DNNL_ARG_SRC_0, a.value}, {DNNL_ARG_SRC_1, b.value},
                           {DNNL_ARG_DST, out.value}}});
  out.diff = memory(out.md, engine_);
  // Both summands receive the output gradient unchanged (a reorder doubles as copy).
  for (int i = 0; i < 2; ++i) {
    dnnl::reorder::primitive_desc pd(engine_, out.md, engine_, tensors_[layer.inputs[i]].md);
    node.backward_data.push_back({dnnl::reorder(pd), {{DNNL_ARG_FROM, out.diff}}, DNNL_ARG_TO, i});
  }
}

void DnnlNetwork::BuildLoss(int index) {
  const int in = model_.layers[index].inputs[0];
  Tensor& logits = tensors_[in];
  const int classes = model_.num_classes;
  memory::desc plain({batch_, classes}, dt::f32, tag::nc);
  memory::desc logits_md = logits.md;
  if (logits_md.dims().size() == 4) logits_md = logits_md.reshape({batch_, classes});
  logits_plain_ = memory(plain, engine_);
  logits_diff_plain_ = memory(plain, engine_);
  memory logits_view(logits_md, engine_, logits.value.get_data_handle());
  memory diff_view(logits_md, engine_, logits.diff.get_data_handle());
  logits_to_plain_.push_back({dnnl::reorder(logits_view, logits_plain_),
                              {{DNNL_ARG_FROM, logits_view}, {DNNL_ARG_TO, logits_plain_}}});
  plain_to_diff_.push_back({dnnl::reorder(logits_diff_plain_, diff_view),
                            {{DNNL_ARG_FROM, logits_diff_plain_}, {DNNL_ARG_TO, diff_view}}});
  probabilities_.resize(size_t(batch_) * classes);
  labels_.assign(batch_, 0);
}

}  // namespace psbench::trainer::dnnl_engine
