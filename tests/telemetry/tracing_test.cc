// Request traces (telemetry/tracing.h): W3C traceparent parsing, the OTLP/JSON encoding, and the
// exporter's endpoint checks. tests/gateway/tracing_test.py runs the exporter against a collector.
#include "telemetry/tracing.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "common/json.h"

namespace quiver::telemetry {
namespace {

TEST(TracingTest, TraceParentIsReadAsW3cTraceContextSaysOrNotAtAll) {
  const auto good = ParseTraceParent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  ASSERT_TRUE(good.has_value());
  EXPECT_EQ(good->trace_id, "0af7651916cd43dd8448eb211c80319c");
  EXPECT_EQ(good->parent_span_id, "b7ad6b7169203331");
  EXPECT_TRUE(good->sampled);
  EXPECT_EQ(good->flags, "01");
  const auto unsampled =
      ParseTraceParent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00");
  ASSERT_TRUE(unsampled.has_value());
  EXPECT_FALSE(unsampled->sampled);
  // A later version is read by its first 55 characters (and what follows a "-").
  for (const char* later : {"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                            "cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-else"}) {
    const auto read = ParseTraceParent(later);
    ASSERT_TRUE(read.has_value()) << later;
    EXPECT_EQ(read->trace_id, "0af7651916cd43dd8448eb211c80319c");
  }
  for (const char* bad :
       {"",
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",    // ff: invalid
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x",  // 00 is 55 exactly
        "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x",   // no "-" after 55
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",    // zero trace id
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",    // zero parent
        "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",    // upper case
        "00-0af7651916cd43dd8448eb211c80319-b7ad6b7169203331-01",     // short trace id
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-",   // trailing
        "00_0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331_01",
        "00-0af7651916cd43dd8448eb211c80319g-b7ad6b7169203331-01"}) {
    EXPECT_FALSE(ParseTraceParent(bad).has_value()) << bad;
  }
}

TEST(TracingTest, NewIdsAreLowerHexOfTheirLengthAndDiffer) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string trace = RandomHexId(16), span = RandomHexId(8);
    EXPECT_TRUE(std::regex_match(trace, std::regex("[0-9a-f]{32}"))) << trace;
    EXPECT_TRUE(std::regex_match(span, std::regex("[0-9a-f]{16}"))) << span;
    seen.insert(trace);
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(TracingTest, OtlpJsonHoldsTheSpansAsTheJsonMappingWantsThem) {
  Span root;
  root.trace_id = "0af7651916cd43dd8448eb211c80319c";
  root.span_id = "b7ad6b7169203331";
  root.name = "POST /v1/embeddings";
  root.start_unix_ns = 1796413543171000001;
  root.end_unix_ns = 1796413543172000002;
  root.attributes = {{"http.route", std::string("/v1/embeddings")},
                     {"http.response.status_code", int64_t{200}}};
  Span child = root;
  child.parent_span_id = "00f067aa0ba902b7";
  child.error = true;
  child.attributes.push_back({"quiver.model", std::string("bad \xC0 name")});  // not UTF-8
  // simdjson checks UTF-8 below: the encoder must have replaced the byte.
  absl::StatusOr<JsonValue> json = JsonValue::Parse(OtlpTraceJson({root, child}, "svc \"x\""));
  ASSERT_TRUE(json.ok()) << json.status();
  const JsonValue& rs = json->Find("resourceSpans")->items()[0];
  const JsonValue& attr = rs.Find("resource")->Find("attributes")->items()[0];
  EXPECT_EQ(attr.Find("key")->as_string(), "service.name");
  EXPECT_EQ(attr.Find("value")->Find("stringValue")->as_string(), "svc \"x\"");
  const JsonValue& scope = rs.Find("scopeSpans")->items()[0];
  EXPECT_EQ(scope.Find("scope")->Find("name")->as_string(), "quiver");
  const auto& spans = scope.Find("spans")->items();
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].Find("traceId")->as_string(), root.trace_id);
  EXPECT_EQ(spans[0].Find("parentSpanId"), nullptr);  // a root span has none
  EXPECT_EQ(spans[0].Find("kind")->as_int(), 2);      // SERVER
  // 64-bit integers as strings.
  EXPECT_EQ(spans[0].Find("startTimeUnixNano")->as_string(), "1796413543171000001");
  EXPECT_EQ(spans[0].Find("endTimeUnixNano")->as_string(), "1796413543172000002");
  EXPECT_EQ(spans[0].Find("attributes")->items()[1].Find("value")->Find("intValue")->as_string(),
            "200");
  EXPECT_EQ(spans[0].Find("status")->Find("code"), nullptr);  // unset
  EXPECT_EQ(spans[1].Find("parentSpanId")->as_string(), "00f067aa0ba902b7");
  EXPECT_EQ(spans[1].Find("status")->Find("code")->as_int(), 2);  // ERROR
  EXPECT_EQ(spans[1].Find("attributes")->items()[2].Find("value")->Find("stringValue")->as_string(),
            "bad \xEF\xBF\xBD name");
}

TEST(TracingTest, AnEndpointThatIsNotAnHttpBaseUrlIsRefusedNamingTheFlag) {
  MetricsRegistry metrics;
  for (const char* bad : {"https://collector:4318", "collector:4318", "http://", "http://:4318",
                          "http://collector:43x8", "http://collector:", "http://collector:65536",
                          "http://collector:0"}) {
    absl::StatusOr<std::unique_ptr<SpanExporter>> e = SpanExporter::Create(bad, "q", &metrics);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_NE(e.status().message().find("--otlp-endpoint"), std::string::npos) << e.status();
  }
  for (const char* good : {"http://collector:4318", "http://127.0.0.1:4318/", "http://[::1]:4318",
                           "http://collector/otlp"}) {
    EXPECT_TRUE(SpanExporter::Create(good, "q", &metrics).ok()) << good;
  }
}

}  // namespace
}  // namespace quiver::telemetry
