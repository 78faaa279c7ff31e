// The chat template qmpi uses when a model ships none: Qwen2.5's ChatML format (docs: qwen-facts
// section 4), written for qmpi's Jinja engine. A default system turn when the conversation has
// no system message; tools announced in the system turn with the same wording Qwen3's template
// uses; assistant tool calls as <tool_call> blocks; tool results inside one user turn.
#pragma once

namespace qmpi {

inline constexpr const char* kChatMlTemplate =
    R"JINJA({#- qmpi's built-in ChatML template (the Qwen2.5-Instruct format). -#}
{%- set default_system = 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' %}
{%- set has_system = messages|length > 0 and messages[0].role == 'system' %}
{%- set system = messages[0].content if has_system else default_system %}
{{- '<|im_start|>system\n' + system }}
{%- if tools %}
    {{- '\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>' }}
    {%- for tool in tools %}
        {{- '\n' + tool|tojson }}
    {%- endfor %}
    {{- '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>' }}
{%- endif %}
{{- '<|im_end|>\n' }}
{%- for message in messages %}
    {%- if loop.first and has_system %}
        {#- already written above #}
    {%- elif message.role in ['user', 'system'] or (message.role == 'assistant' and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
    {%- elif message.role == 'assistant' %}
        {{- '<|im_start|>assistant' }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for call in message.tool_calls %}
            {%- set fn = call.function if call.function is defined else call %}
            {{- '\n<tool_call>\n{"name": "' + fn.name + '", "arguments": ' }}
            {{- fn.arguments if fn.arguments is string else fn.arguments|tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == 'tool' %}
        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' + message.content + '\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- else %}
        {{- raise_exception("message " ~ loop.index0 ~ " has role '" ~ message.role ~ "'; this template knows system, user, assistant and tool") }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)JINJA";

}  // namespace qmpi
