#include "core/sparse/predictor.h"

#include "core/sparse/active_set.h"

namespace ember {

int64_t predict_active_neurons(const PredictorArgs& a, ThreadPool& pool, MatmulScratch& scratch) {
  matmul(a.fc1, a.x, 1, a.fc1.cols, a.hidden, a.fc1.rows, pool, scratch);
  for (int64_t j = 0; j < a.fc1.rows; ++j) a.hidden[j] = a.hidden[j] > 0.0f ? a.hidden[j] : 0.0f;
  matmul(a.fc2, a.hidden, 1, a.fc2.cols, a.scores, a.fc2.rows, pool, scratch);
  return select_above(a.scores, a.fc2.rows, a.threshold, a.active);
}

}  // namespace ember
