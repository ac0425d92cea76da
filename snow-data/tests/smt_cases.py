"""Writes smt_cases.jsonl beside this file: the cases connect_parity.rs runs through Kafka
Connect's own transforms and ours (`python3 snow-data/tests/smt_cases.py`). Each case: a name, a
connector configuration, a record in JsonConverter's envelope form, and whether error messages
are compared."""
import os
import json
S = {"type":"struct","name":"servicenow.incident","optional":False,"fields":[
 {"field":"sys_id","type":"string","optional":False},
 {"field":"number","type":"string","optional":True},
 {"field":"priority","type":"int32","optional":True},
 {"field":"opened_at","type":"int64","optional":True,"name":"org.apache.kafka.connect.data.Timestamp","version":1},
 {"field":"cost","type":"bytes","optional":True,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2"}},
 {"field":"active","type":"boolean","optional":True},
 {"field":"caller","type":"struct","optional":True,"name":"servicenow.sys_user","fields":[
   {"field":"id","type":"string","optional":False},{"field":"name","type":"string","optional":True}]}]}
P = {"sys_id":"a1","number":"INC0001","priority":3,"opened_at":1700000000123,"cost":"MDk=","active":True,"caller":{"id":"u1","name":"Ann"}}
V = {"schema":S,"payload":P}
SL = {"schema":None,"payload":{"sys_id":"a1","priority":3,"ts":1700000000123,"nested":{"x":1,"y":{"z":"q"}},"list":[1,2]}}
K = {"schema":{"type":"string","optional":False},"payload":"a1"}
def rec(value=V, key=K, topic="servicenow.incident", offset=None, headers=None, ts=1700000000123, partition=0):
    r = {"topic":topic,"partition":partition,"key":key,"value":value,"timestamp":ts,"headers":headers or []}
    if offset is not None: r["offset"] = offset
    return r
def one(alias_type, **conf):
    c = {"transforms":"x","transforms.x.type":"org.apache.kafka.connect.transforms."+alias_type}
    for k,v in conf.items(): c["transforms.x."+k.replace("_",".")] = v
    return c
cases = []
def case(name, config, record=None, messages=True):
    cases.append({"name":name,"config":config,"record":record or rec(),"compare_messages":messages})
case("InsertField with a schema", one("InsertField$Value", **{"topic_field":"t","partition_field":"p!","timestamp_field":"ts","static_field":"src","static_value":"snow"}))
case("InsertField without a schema", one("InsertField$Value", **{"topic_field":"t","partition_field":"p","timestamp_field":"ts","static_field":"src","static_value":"snow"}), rec(SL))
case("InsertField offset on a source record", one("InsertField$Value", offset_field="o"))
case("InsertField offset on a sink record", one("InsertField$Value", offset_field="o"), rec(offset=42))
case("InsertField on a tombstone", one("InsertField$Value", topic_field="t"), rec(None))
case("InsertField on the key", one("InsertField$Key", topic_field="t"), rec(key=SL))
case("ReplaceField include exclude renames", one("ReplaceField$Value", include="sys_id,number,priority", exclude="priority", renames="number:num,sys_id:id"))
case("ReplaceField without a schema", one("ReplaceField$Value", exclude="nested", renames="priority:prio"), rec(SL))
case("ReplaceField bad renames", one("ReplaceField$Value", renames="a:b:c"))
case("MaskField defaults", one("MaskField$Value", fields="number,priority,opened_at,cost,active"))
case("MaskField text replacement", one("MaskField$Value", fields="number", replacement="xxx"))
case("MaskField number replacement", one("MaskField$Value", fields="priority", replacement="12.7"))
case("MaskField on a tombstone", one("MaskField$Value", fields="number"), rec(None), messages=True)
case("MaskField without a schema adds absent fields", one("MaskField$Value", fields="priority,zz"), rec(SL))
case("MaskField a struct", one("MaskField$Value", fields="caller"))
case("ValueToKey with a schema", {"transforms":"x","transforms.x.type":"org.apache.kafka.connect.transforms.ValueToKey","transforms.x.fields":"number,sys_id"})
case("ValueToKey without a schema", {"transforms":"x","transforms.x.type":"org.apache.kafka.connect.transforms.ValueToKey","transforms.x.fields":"sys_id,zz"}, rec(SL))
case("ValueToKey missing field", {"transforms":"x","transforms.x.type":"org.apache.kafka.connect.transforms.ValueToKey","transforms.x.fields":"nope"})
case("ExtractField a field", one("ExtractField$Value", field="number"))
case("ExtractField from a string key", one("ExtractField$Key", field="id"))
case("ExtractField a nested path", one("ExtractField$Value", field="caller.name", **{"field_syntax_version":"V2"}))
case("ExtractField a nested path without a schema", one("ExtractField$Value", field="nested.y.z", **{"field_syntax_version":"v2"}), rec(SL))
case("ExtractField an unknown field", one("ExtractField$Value", field="nope"))
case("HoistField the key", one("HoistField$Key", field="id"))
case("HoistField without a schema", one("HoistField$Value", field="row"), rec(SL))
case("Cast fields", one("Cast$Value", spec="priority:string,active:int32,cost:float64,opened_at:string,number:string"))
case("Cast the whole key", one("Cast$Key", spec="string"))
case("Cast without a schema", one("Cast$Value", spec="priority:string,ts:float64,list2:int32,missing:int32"), rec(SL))
case("Cast a bad spec", one("Cast$Value", spec="a:b:c"))
case("Cast to bytes", one("Cast$Value", spec="a:bytes"))
case("TimestampConverter to text", one("TimestampConverter$Value", field="opened_at", **{"target_type":"string","format":"yyyy-MM-dd HH:mm:ss"}))
case("TimestampConverter to unix seconds", one("TimestampConverter$Value", field="opened_at", **{"target_type":"unix","unix_precision":"seconds"}))
case("TimestampConverter to Date", one("TimestampConverter$Value", field="opened_at", **{"target_type":"Date"}))
case("TimestampConverter without a schema", one("TimestampConverter$Value", field="ts", **{"target_type":"string","format":"dd MMM yyyy HH:mm:ss.SSS"}), rec(SL))
case("TimestampConverter from text", one("TimestampConverter$Value", field="number", **{"target_type":"unix","format":"yyyy"}), rec({"schema":{"type":"struct","optional":False,"fields":[{"field":"number","type":"string","optional":False}]},"payload":{"number":"2024"}}))
case("Flatten with a schema", one("Flatten$Value", delimiter="_"))
case("Flatten without a schema", one("Flatten$Value"), rec(SL))
case("RegexRouter", {"transforms":"x","transforms.x.type":"org.apache.kafka.connect.transforms.RegexRouter","transforms.x.regex":"servicenow\\.(.*)","transforms.x.replacement":"snow-$1"})
case("TimestampRouter", {"transforms":"x","transforms.x.type":"org.apache.kafka.connect.transforms.TimestampRouter"})
case("TimestampRouter without a timestamp", {"transforms":"x","transforms.x.type":"org.apache.kafka.connect.transforms.TimestampRouter"}, rec(ts=None), messages=False)
filt = lambda p, negate=None, **pc: dict({"transforms":"x","transforms.x.type":"org.apache.kafka.connect.transforms.Filter","transforms.x.predicate":"p","predicates":"p","predicates.p.type":"org.apache.kafka.connect.transforms.predicates."+p}, **({"transforms.x.negate":negate} if negate else {}), **{"predicates.p."+k:v for k,v in pc.items()})
case("Filter under TopicNameMatches", filt("TopicNameMatches", pattern="servicenow\\..*"))
case("Filter under a negated TopicNameMatches", filt("TopicNameMatches", negate="true", pattern="other"))
case("Filter under HasHeaderKey, absent", filt("HasHeaderKey", name="skip"))
case("Filter under HasHeaderKey, present", filt("HasHeaderKey", name="skip"), rec(headers=[{"key":"skip","value":{"schema":{"type":"string","optional":False},"payload":"y"}}]))
case("Filter under RecordIsTombstone", filt("RecordIsTombstone"), rec(None))
case("HeaderFrom move", one("HeaderFrom$Value", fields="number,priority", headers="h1,h2", operation="move"))
case("HeaderFrom copy without a schema", one("HeaderFrom$Value", fields="priority,zz", headers="h1,h2", operation="copy"), rec(SL))
case("InsertHeader literals", {"transforms":"a,b,c,d","transforms.a.type":"org.apache.kafka.connect.transforms.InsertHeader","transforms.a.header":"n","transforms.a.value.literal":"42",
  "transforms.b.type":"org.apache.kafka.connect.transforms.InsertHeader","transforms.b.header":"d","transforms.b.value.literal":"2024-01-02",
  "transforms.c.type":"org.apache.kafka.connect.transforms.InsertHeader","transforms.c.header":"s","transforms.c.value.literal":"hello",
  "transforms.d.type":"org.apache.kafka.connect.transforms.InsertHeader","transforms.d.header":"b","transforms.d.value.literal":"true"})
case("DropHeaders", {"transforms":"x","transforms.x.type":"org.apache.kafka.connect.transforms.DropHeaders","transforms.x.headers":"a,c"},
  rec(headers=[{"key":k,"value":{"schema":{"type":"string","optional":False},"payload":k}} for k in ["a","b","c","a"]]))
case("SetSchemaMetadata", one("SetSchemaMetadata$Value", **{"schema_name":"com.example.Incident","schema_version":"7"}))
case("SetSchemaMetadata without a schema", one("SetSchemaMetadata$Value", **{"schema_name":"x"}), rec(SL))
case("A chain", {"transforms":"r,c,route","transforms.r.type":"org.apache.kafka.connect.transforms.ReplaceField$Value","transforms.r.include":"sys_id,priority,opened_at",
  "transforms.c.type":"org.apache.kafka.connect.transforms.Cast$Value","transforms.c.spec":"priority:string",
  "transforms.route.type":"org.apache.kafka.connect.transforms.RegexRouter","transforms.route.regex":"servicenow\\.(.*)","transforms.route.replacement":"$1-changes"})
case("ValueToKey then ExtractField of the key", {"transforms":"a,b","transforms.a.type":"org.apache.kafka.connect.transforms.ValueToKey","transforms.a.fields":"number",
  "transforms.b.type":"org.apache.kafka.connect.transforms.ExtractField$Key","transforms.b.field":"number"})
case("TimestampConverter to Time", one("TimestampConverter$Value", field="opened_at", **{"target_type":"Time"}))
case("TimestampConverter whole value from unix micros", one("TimestampConverter$Value", **{"target_type":"Timestamp","unix_precision":"microseconds"}),
  rec({"schema":{"type":"int64","optional":False},"payload":1700000000123456}))
case("TimestampConverter a non-timestamp field", one("TimestampConverter$Value", field="priority", **{"target_type":"string","format":"yyyy"}))
case("Cast int to int8 wraps", one("Cast$Value", spec="priority:int8"), rec({"schema":{"type":"struct","optional":False,"fields":[{"field":"priority","type":"int32","optional":False}]},"payload":{"priority":300}}))
case("Cast text to int8 out of range", one("Cast$Value", spec="int8"), rec({"schema":{"type":"string","optional":False},"payload":"300"}))
case("Cast a decimal to text and int", one("Cast$Value", spec="cost:string"))
case("InsertField a required partition", one("InsertField$Value", **{"partition_field":"p!"}), rec(partition=None), messages=False)
case("Flatten an optional struct default", one("Flatten$Value", delimiter="__"), rec({"schema":{"type":"struct","optional":False,"fields":[
  {"field":"a","type":"struct","optional":True,"fields":[{"field":"x","type":"int32","optional":False},{"field":"y","type":"string","optional":True,"default":"dflt"}]}]},
  "payload":{"a":{"x":1,"y":None}}}))
case("HeaderFrom copy keeps the value", one("HeaderFrom$Value", fields="opened_at", headers="when", operation="copy"))
case("ReplaceField on the key", one("ReplaceField$Key", renames="sys_id:id"), rec(key={"schema":{"type":"struct","optional":False,"fields":[{"field":"sys_id","type":"string","optional":False}]},"payload":{"sys_id":"a1"}}))
case("RegexRouter no full match", {"transforms":"x","transforms.x.type":"org.apache.kafka.connect.transforms.RegexRouter","transforms.x.regex":"incident","transforms.x.replacement":"x"})
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "smt_cases.jsonl"), "w") as f:
    for c in cases: f.write(json.dumps(c)+"\n")
print(len(cases))
