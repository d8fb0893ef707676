// headroom-crdgen: the TrainingJob CRD from core/spec's field table and overlay
// (crd_generator.h). With no argument it prints the CRD; with paths it writes the CRD to
// each (scripts/generate-crds.sh passes crds/ and the chart's copy).
#include <cstdio>
#include <fstream>
#include <iostream>

#include "core/spec/crd_generator.h"

int main(int argc, char** argv) {
  const std::string crd = headroom::spec::TrainingJobCrdYaml();
  if (argc == 1) {
    std::cout << crd;
    return 0;
  }
  for (int i = 1; i < argc; ++i) {
    std::ofstream out(argv[i], std::ios::binary | std::ios::trunc);
    out << crd;
    out.close();
    if (!out) {
      std::fprintf(stderr, "headroom-crdgen: cannot write %s\n", argv[i]);
      return 1;
    }
  }
  return 0;
}
