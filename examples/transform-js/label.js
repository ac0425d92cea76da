// An example transform component in JavaScript (world `transform`, docs/transforms.md), compiled
// to a WASI component by the Bytecode Alliance's ComponentizeJS (build.mjs): **label** adds a
// readable label beside a coded field, such as ServiceNow's priority `1` → `Critical`.
//
// Keys (under `transforms.<alias>.`): `field` (required: the value field holding the code),
// `labels` (required: `code:label` pairs, comma-separated), `into` (the new field; default
// `<field>_label`), `unknown` (`keep`: a code without a label gets no label, the default; `fail`:
// the record fails, under the connector's errors.tolerance). Typed values get `into` added to
// their schema as an optional string; a tombstone passes unchanged.

function read(config) {
  const get = (k) => {
    const e = config.find((e) => e.key === k);
    return e && e.value.trim() !== '' ? e.value.trim() : undefined;
  };
  const errors = [];
  const field = get('field');
  if (field === undefined) errors.push({ key: 'field', message: 'is required: the value field holding the code' });
  const labels = new Map();
  const text = get('labels');
  if (text === undefined) errors.push({ key: 'labels', message: 'is required: code:label pairs, comma-separated' });
  for (const pair of (text ?? '').split(',').filter((p) => p.trim() !== '')) {
    const at = pair.indexOf(':');
    if (at <= 0) errors.push({ key: 'labels', message: `${JSON.stringify(pair.trim())} is not code:label` });
    else labels.set(pair.slice(0, at).trim(), pair.slice(at + 1).trim());
  }
  const unknown = get('unknown') ?? 'keep';
  if (unknown !== 'keep' && unknown !== 'fail') errors.push({ key: 'unknown', message: `must be keep or fail, got ${JSON.stringify(unknown)}` });
  for (const { key } of config) {
    if (!['field', 'labels', 'into', 'unknown'].includes(key)) {
      errors.push({ key, message: 'unknown key (this transform reads field, labels, into, unknown)' });
    }
  }
  return { errors, settings: { field, labels, into: get('into') ?? `${field}_label`, unknown } };
}

class Transformer {
  constructor(settings) {
    this.s = settings;
  }

  static open(config) {
    const { errors, settings } = read(config);
    if (errors.length > 0) throw errors.map((e) => `${e.key}: ${e.message}`).join('; ');
    return new Transformer(settings);
  }

  apply(input) {
    if (input.value === undefined) return [input];
    const value = JSON.parse(input.value);
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw `the value is not an object, so it has no field ${this.s.field}`;
    }
    const code = value[this.s.field];
    const label = code === undefined || code === null ? undefined : this.s.labels.get(String(code));
    if (label === undefined && code !== undefined && code !== null && this.s.unknown === 'fail') {
      throw `field ${this.s.field}: ${JSON.stringify(code)} has no label`;
    }
    value[this.s.into] = label ?? null;
    let valueSchema = input.valueSchema;
    if (valueSchema !== undefined) {
      const schema = JSON.parse(valueSchema);
      if (schema.type !== 'struct') throw 'the value schema is not a struct';
      if (!schema.fields.some((f) => f.field === this.s.into)) {
        schema.fields.push({ field: this.s.into, type: 'string', optional: true });
      }
      valueSchema = JSON.stringify(schema);
    }
    return [{ ...input, value: JSON.stringify(value), valueSchema }];
  }
}

export const transformApi = {
  validate(config) {
    const { errors } = read(config);
    if (errors.length > 0) throw errors;
  },
  Transformer,
};
