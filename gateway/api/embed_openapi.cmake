# Writes OUTPUT, a C++ file defining quiver::gateway::api::OpenApiDocument() as the text of INPUT.
file(READ ${INPUT} text)
string(FIND "${text}" ")openapi\"" bad)
if(NOT bad EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )openapi\"")
endif()
file(WRITE ${OUTPUT}
"// Generated from gateway/api/openapi.json by gateway/api/embed_openapi.cmake.
#include \"gateway/api/openapi.h\"

namespace quiver::gateway::api {
std::string_view OpenApiDocument() {
  static constexpr std::string_view kDocument = R\"openapi(${text})openapi\";
  return kDocument;
}
}  // namespace quiver::gateway::api
")
