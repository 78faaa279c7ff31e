#include "batch/batch_ids.h"

#include "requests/request_parser.h"

namespace qmpi {

std::string BatchIds::assign(const std::string& parsed_id, int64_t line_no,
                             std::optional<Error>& error) {
  const std::string own = line_id(line_no);
  const std::string where = "line " + std::to_string(line_no) + ": ";
  std::string id = parsed_id;
  if (id != own && is_line_id_form(id)) {
    error = Error(Err::RequestField,
                  where + "custom_id \"" + id +
                      "\" is reserved: qmpi-line-N names the result of line N "
                      "when that line has no usable id of its own",
                  "Give the line another id.");
    id = own;
  } else if (const auto it = seen_.find(id); it != seen_.end()) {
    // A repeated id would make resume ambiguous: the line gets an id of its own.
    error = Error(Err::RequestField, where + "custom_id \"" + id + "\" was already used on line " +
                                         std::to_string(it->second));
    id = own;
  }
  seen_.emplace(id, line_no);
  return id;
}

}  // namespace qmpi
